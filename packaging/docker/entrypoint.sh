#!/bin/sh
# shournal Docker edition entrypoint: check that this container may record
# (the setuid helper needs CAP_SYS_ADMIN for unshare + fanotify mount marks
# and CAP_SYS_PTRACE to join a command's namespace from its holder), make the
# user's journal directory in the volume, then run the command (default: a
# login bash, recorded through /etc/bash.bashrc).
#
# Exit status 1 with one line on stderr when the container lacks the
# privileges; SHOURNAL_DOCKER_UNRECORDED=1 runs the command unrecorded instead.
set -eu
HELPER=/usr/libexec/shournal/shournal-suid
RUN_FLAGS="--cap-add SYS_ADMIN --cap-add SYS_PTRACE"

missing=""
capbnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
[ $(( 0x$capbnd >> 21 & 1 )) -eq 1 ] || missing="$missing CAP_SYS_ADMIN"
[ $(( 0x$capbnd >> 19 & 1 )) -eq 1 ] || missing="$missing CAP_SYS_PTRACE"
if grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status; then
    reason="no-new-privileges is set, so the setuid helper cannot work; run without --security-opt no-new-privileges"
elif [ -n "$missing" ]; then
    reason="the container lacks${missing}; run it with $RUN_FLAGS"
elif ! report=$("$HELPER" check 2>&1); then
    reason="$(printf '%s\n' "$report" | grep -m1 FAIL || echo "$HELPER check failed"); run it with $RUN_FLAGS as a rootful container"
else
    reason=""
fi

if [ -n "$reason" ]; then
    if [ "${SHOURNAL_DOCKER_UNRECORDED-}" != 1 ]; then
        echo "shournal: cannot record in this container: $reason (or set SHOURNAL_DOCKER_UNRECORDED=1)" >&2
        exit 1
    fi
    echo "shournal: NOT recording: $reason" >&2
    export SHOURNAL_DOCKER_UNRECORDED=1
fi

# A bind-mounted /journal starts empty: make the user's directory if the
# host's permissions let him (shournal refuses a journal directory that is
# not his own or that others may write, e.g. one made first by another user).
user=$(id -un)
[ -d "/journal/$user" ] || mkdir -m 700 "/journal/$user" 2>/dev/null || true
exec "$@"
