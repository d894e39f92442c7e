#!/bin/sh
# Installs the Debian packages shournal needs to build, run and be tested.
# Only missing packages are fetched, so a second run is fast.
set -eu
PKGS="build-essential python3-venv python3-dev libffi-dev zsh postgresql util-linux procps passwd"
PKGS="$PKGS bubblewrap"  # shournal replay: its sandbox, without privileged code of ours
# shournal describe tool packs the tool's image as squashfs in SIF; recombine
# unpacks it (no Apptainer needed).
PKGS="$PKGS squashfs-tools siftool"
PKGS="$PKGS chromium fonts-dejavu-core"  # the HTML report is tested in headless Chromium
# `shournal export snakemake` is tested with the real Snakemake: Debian's
# package (bookworm: 7.21 on the system Python 3.11) runs as its own program,
# so it needs nothing from the test environment.
PKGS="$PKGS snakemake"
[ "${1-}" = "--bench" ] && PKGS="$PKGS hyperfine strace git linux-source-6.1 xz-utils dpkg-dev linux-perf"
# Building the .deb, linting it, and testing it and the container image from
# a fresh debootstrap root filesystem (packaging/test-fresh-system.sh).
[ "${1-}" = "--packaging" ] && PKGS="$PKGS debhelper dpkg-dev lintian debootstrap podman rsync libyaml-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "apt-deps: missing packages:$missing (run as root)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086  # word splitting is the point
apt-get install -y -qq --no-install-recommends $missing >/dev/null
