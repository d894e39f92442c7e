#!/bin/sh
# Packaging stage of CI (run as root on Debian 12): build the .deb, lint it,
# and test it and the Docker edition from a fresh Debian 12 root filesystem
# (debootstrap minbase, cached in /var/cache/shournal-ci and reused).
# Needs the development venv (.venv, from `make dev`) for pytest + pexpect.
set -eu
cd "$(dirname "$0")/.."
t0=$(date +%s)
phase() { echo "== $1 (at $(( $(date +%s) - t0 )) s)" >&2; }
sh scripts/apt-deps.sh --packaging
[ -x .venv/bin/pytest ] || make dev
OUT=build/deb
rm -rf "$OUT"
mkdir -p "$OUT"
# debootstrap waits on the mirror, the build on the CPU: the root file
# system is made meanwhile.
phase "fresh Debian 12 root filesystem (in the background)"
packaging/ci/bookworm-rootfs.sh >"$OUT/rootfs-path" &
rootfs_job=$!
phase "build the package"
packaging/build-deb.sh "$OUT" >/dev/null
deb=$(ls "$OUT"/shournal_*_*.deb | grep -v dbgsym)
phase "lintian $deb"
# Errors and warnings fail; the only override is the setuid helper's.
lintian --fail-on error,warning "$deb"
phase "wait for the root filesystem"
wait "$rootfs_job" || { echo "test-fresh-system: no root filesystem (above)" >&2; exit 1; }
rootfs=$(cat "$OUT/rootfs-path")
export SHOURNAL_CI_DEB="$PWD/$deb" SHOURNAL_CI_ROOTFS="$rootfs"
phase "tests"
cd packaging/tests
# The two files share nothing and mostly wait on apt: one worker each.
exec ../../.venv/bin/pytest -q -p no:cacheprovider --rootdir=../.. -n 2 --dist loadfile "$@" \
    test_fresh_system.py test_docker.py
