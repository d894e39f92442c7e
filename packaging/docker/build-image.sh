#!/bin/sh
# Build the shournal image from a .deb.
# Usage: packaging/docker/build-image.sh DEB [TAG] [extra build args...]
# DOCKER=podman selects another engine (default: docker).
set -eu
[ $# -ge 1 ] || { echo "usage: build-image.sh DEB [TAG] [BUILD-ARGS...]" >&2; exit 2; }
deb=$1; tag=${2:-shournal}; [ $# -ge 2 ] && shift 2 || shift 1
here=$(cd "$(dirname "$0")" && pwd)
ctx=$(mktemp -d "${TMPDIR:-/var/tmp}/shournal-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
cp "$here/Dockerfile" "$here/entrypoint.sh" "$here/shell-rc.sh" "$deb" "$ctx/"
"${DOCKER:-docker}" build -t "$tag" "$@" "$ctx"
