#!/bin/sh
# Build shournal_<version>_<arch>.deb with dpkg-buildpackage.
#
# Layout: the Debian directory lives in packaging/debian/ so that it stays
# out of the way of the Python and native sources.  This script exports the
# tree (tracked and untracked-but-not-ignored files, i.e. what a clean clone
# plus your edits holds) into a temporary directory, copies packaging/debian
# to debian/ there, and runs `dpkg-buildpackage -us -uc -b` in it.  The
# checkout itself is never written to, except for the output directory.
#
# Usage: packaging/build-deb.sh [OUTDIR]   (default: build/deb)
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$SRC/build/deb}
VERSION=$(dpkg-parsechangelog -l "$SRC/packaging/debian/changelog" -S Version)
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/shournal-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

TREE=$WORK/shournal-$VERSION
mkdir -p "$TREE"
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$SRC" && xargs -0 cp --parents -t "$TREE" 2>/dev/null) || true
# Deleted-but-tracked files make cp complain; what matters is that the
# sources it needs are there.
for f in pyproject.toml native/Makefile shell/shournal.bash; do
    [ -e "$TREE/$f" ] || { echo "build-deb: $f missing from the export" >&2; exit 1; }
done
rm -rf "$TREE/debian"
cp -a "$SRC/packaging/debian" "$TREE/debian"

(cd "$TREE" && dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 || {
    tail -n 40 "$WORK/build.log" >&2
    echo "build-deb: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
mkdir -p "$OUT"
cp "$WORK"/*.deb "$WORK"/*.buildinfo "$WORK"/*.changes "$OUT"/
cp "$WORK/build.log" "$OUT/build.log"
ls "$OUT"/*.deb
