#!/bin/sh
# Make sure a minimal Debian 12 root filesystem exists in the cache and print
# its path.  It is built once with debootstrap (minbase) and reused by later
# runs, which copy it before touching it.  The mirror is the one this host
# already uses for bookworm, read from its apt sources at run time.
set -eu
CACHE=${SHOURNAL_CI_CACHE:-/var/cache/shournal-ci}
ROOTFS=$CACHE/bookworm-rootfs
SUITE=bookworm

# First URI of a "deb" source for exactly $SUITE with component main, from
# one-line (.list) or deb822 (.sources) files.
host_mirror() {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk -v s="$SUITE" '$1 == "deb" {
                i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk -v s="$SUITE" '
            function flush() {
                if (deb && suite && main && uri != "") print uri
                deb = suite = main = 0; uri = ""
            }
            /^[ \t]*$/ { flush(); next }
            /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
            /^Components:/ { for (i = 2; i <= NF; i++) if ($i == "main") main = 1 }
            END { flush() }' "$f"
    done
}

if [ ! -e "$ROOTFS/.complete" ]; then
    mirror=$(host_mirror | head -n 1)
    if [ -z "$mirror" ]; then
        echo "bookworm-rootfs: no '$SUITE main' source in /etc/apt; cannot pick a mirror" >&2
        exit 1
    fi
    rm -rf "$ROOTFS.tmp"
    mkdir -p "$CACHE"
    echo "bookworm-rootfs: debootstrap $SUITE from $mirror into $ROOTFS" >&2
    debootstrap --variant=minbase "$SUITE" "$ROOTFS.tmp" "$mirror" >"$CACHE/debootstrap.log" 2>&1 || {
        tail -n 20 "$CACHE/debootstrap.log" >&2
        exit 1
    }
    rm -f "$ROOTFS.tmp/var/cache/apt/archives/"*.deb
    rm -rf "$ROOTFS"
    mv "$ROOTFS.tmp" "$ROOTFS"
    touch "$ROOTFS/.complete"
fi
echo "$ROOTFS"
