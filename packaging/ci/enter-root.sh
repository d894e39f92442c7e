#!/bin/sh
# Usage: enter-root.sh ROOT COMMAND [ARGS...]
# Run COMMAND with the root filesystem ROOT as "/" of fresh mount, PID, IPC
# and UTS namespaces: proc is ROOT's own, /dev is the host's (ptys
# included), and everything left running is killed when COMMAND exits.
# pivot_root, not chroot: setns() into a mount namespace (which the
# helper's exec trampoline does) moves a process to the namespace's root
# mount, which must therefore be ROOT itself.
set -eu
[ $# -ge 2 ] || { echo "usage: enter-root.sh ROOT COMMAND [ARGS...]" >&2; exit 2; }
exec unshare --mount --pid --ipc --uts --fork --propagation private -- /bin/sh -euc '
    root=$1; shift
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    hostname shournal-ci
    cd "$root"
    pivot_root . .
    umount -l .
    cd /
    exec /usr/bin/env -u TMPDIR "$@"
' enter-root "$@"
