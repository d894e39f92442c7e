#!/bin/sh
# Run every benchmark in turn, as root (see bench/README.md).
#
# Environment:
#   NOFILE=20000    soft RLIMIT_NOFILE for the observed commands (default:
#                   inherited, 1024 on Debian; see README "Known problems")
#   TAG=name        suffix of the result files in bench/results/
#   REPS_COPY=6 REPS_GIT=6 REPS_MAKE=3 LATENCY_N=100   repetitions
#   CACHE=cold,warm cache modes of the workloads
#   VARIANTS=full,floor   add ",relay" for the holder-only variant
#   SKIP="git make" skip workloads (copy storage latency git make)
#   PYTHON          interpreter (default: the repository's .venv)
# Logs: ${SHOURNAL_BENCH_CACHE:-/var/tmp/shournal-bench}/logs/<workload>.log
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-$here/../.venv/bin/python}
logs=${SHOURNAL_BENCH_CACHE:-/var/tmp/shournal-bench}/logs
mkdir -p "$logs"
skip=" ${SKIP-} "
common="--cache ${CACHE:-cold,warm} --variants ${VARIANTS:-full,floor}"
opt=""
[ -n "${NOFILE-}" ] && opt="$opt --nofile $NOFILE"
[ -n "${TAG-}" ] && opt="$opt --tag $TAG"

run() {
    name=$1
    shift
    case $skip in *" $name "*) echo "== skipping $name"; return 0 ;; esac
    echo "== $name: $*  (log: $logs/$name.log)"
    start=$(date +%s)
    # shellcheck disable=SC2068
    "$py" $@ >"$logs/$name.log" 2>&1 || echo "!! $name failed, see $logs/$name.log"
    sed -n '/^== /,$p' "$logs/$name.log"
    echo "== $name took $(( $(date +%s) - start )) s"
}

run copy "$here/copy_tree.py" --reps "${REPS_COPY:-6}" $common $opt
run storage "$here/storage.py" $opt
run latency "$here/latency.py" --n "${LATENCY_N:-100}" ${TAG:+--tag $TAG}
run git "$here/git_checkout.py" --reps "${REPS_GIT:-6}" $common $opt
run make "$here/make_elfutils.py" --reps "${REPS_MAKE:-3}" $common $opt
