#!/bin/sh
# Packaging stage of CI (run as root on Debian 12): build the .deb, lint it,
# and test it and the Docker edition from a fresh Debian 12 root filesystem
# (debootstrap minbase, cached in /var/cache/shournal-ci and reused).
# Needs the development venv (.venv, from `make dev`) for pytest + pexpect.
set -eu
cd "$(dirname "$0")/.."
sh scripts/apt-deps.sh --packaging
[ -x .venv/bin/pytest ] || make dev
OUT=build/deb
rm -rf "$OUT"
echo "== build the package" >&2
packaging/build-deb.sh "$OUT" >/dev/null
deb=$(ls "$OUT"/shournal_*_*.deb | grep -v dbgsym)
echo "== lintian $deb" >&2
# Errors and warnings fail; the only override is the setuid helper's.
lintian --fail-on error,warning "$deb"
echo "== fresh Debian 12 root filesystem" >&2
rootfs=$(packaging/ci/bookworm-rootfs.sh)
export SHOURNAL_CI_DEB="$PWD/$deb" SHOURNAL_CI_ROOTFS="$rootfs"
echo "== tests" >&2
cd packaging/tests
exec ../../.venv/bin/pytest -q -p no:cacheprovider --rootdir=../.. "$@" \
    test_fresh_system.py test_docker.py
