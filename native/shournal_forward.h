/* Handing a command line to the user's store daemon: shared by the
 * forwarder (shournal_forward.c) and the setup helper, which does the
 * first hand-over itself after its permanent drop to the user
 * (`setup --forward`, see cmd_setup in shournal_suid.c) and execs the
 * forwarder only when that fails.  Unprivileged code: libc only, no
 * unbounded buffers, every return value checked.  The control socket is
 * on SHOURNAL_FD_SOCKET and the holder's relay on SHOURNAL_FD_EVENTS. */
#ifndef SHOURNAL_FORWARD_H
#define SHOURNAL_FORWARD_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "shournal_fdpass.h"
#include "shournal_protocol.h"

/* Must match setup_rundir() in preload/settings.c and
 * shournal._paths.runtime_dir(); never a directory somebody else made. */
static inline int shournal_fw_runtime_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int len;

    if (xdg && xdg[0] == '/')
        len = snprintf(buf, n, "%s/shournal", xdg);
    else
        len = snprintf(buf, n, "/tmp/shournal-%d", (int)getuid());
    if (len < 0 || (size_t)len >= n)
        return -1;
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
    if (lstat(buf, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) != 0)
        return -1;
    return 0;
}

/* The journal key of our environment (see SHOURNAL_DAEMON_SOCKET in
 * shournal_protocol.h; shournal._paths.journal_key): which store daemon
 * and spool serve a command line, decided by the variables that decide
 * its journal.  In bash's process getenv() is bash's own, which sees the
 * shell's current exports (its environ does not). */
static inline void shournal_journal_key(char out[SHOURNAL_KEY_LEN + 1])
{
    static const char *const names[] = {"SHOURNAL_DB_URL", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                        "HOME"};
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        for (; v && *v; v++) {
            h ^= (unsigned char)*v;
            h *= 1099511628211ULL;
        }
        h *= 1099511628211ULL; /* the NUL after each value: h ^= 0 */
    }
    (void)snprintf(out, SHOURNAL_KEY_LEN + 1, "%016llx", (unsigned long long)h);
}

/* <rundir>/daemon.<key>.sock; -1 if the runtime directory is unusable. */
static inline int shournal_fw_daemon_addr(struct sockaddr_un *addr)
{
    char rundir[PATH_MAX], key[SHOURNAL_KEY_LEN + 1], name[64];

    if (shournal_fw_runtime_dir(rundir, sizeof rundir) != 0)
        return -1;
    shournal_journal_key(key);
    if (snprintf(name, sizeof name, SHOURNAL_DAEMON_SOCKET, key) >= (int)sizeof name)
        return -1;
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    return (size_t)snprintf(addr->sun_path, sizeof addr->sun_path, "%s/%s", rundir, name) <
                   sizeof addr->sun_path
               ? 0
               : -1;
}

static inline int shournal_fw_connect(const struct sockaddr_un *addr)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    if (connect(s, (const struct sockaddr *)addr, sizeof *addr) == 0)
        return s;
    (void)close(s);
    return -1;
}

/* FORWARD: our pid (the markers' name), `arg` (SHOURNAL_FORWARD_BY_HELPER
 * or 0), the working directory, both fds. */
static inline int shournal_fw_send(int s, const char *cwd, uint32_t arg)
{
    struct shournal_daemon_msg m = {SHOURNAL_MSG_FORWARD, (int32_t)getpid(), arg, 0};
    char buf[sizeof m + PATH_MAX];
    size_t cwdlen = cwd ? strnlen(cwd, PATH_MAX) : 0;
    struct iovec iov;
    int fds[2] = {SHOURNAL_FD_SOCKET, SHOURNAL_FD_EVENTS};
    ssize_t n;

    if (cwdlen >= PATH_MAX)
        cwdlen = 0;
    memcpy(buf, &m, sizeof m);
    if (cwdlen)
        memcpy(buf + sizeof m, cwd, cwdlen);
    iov.iov_base = buf;
    iov.iov_len = sizeof m + cwdlen;
    do
        n = shournal_send_fds(s, &iov, 1, fds, 2, 0);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)iov.iov_len ? 0 : -1;
}

/* One hand-over on connected socket `s` (closed here): 0 once the daemon
 * says the command line is spooled, -1 otherwise (we still hold both fds:
 * the command line goes to the next daemon or the Python listener). */
static inline int shournal_fw_hand_over(int s, const char *cwd, uint32_t arg)
{
    struct shournal_daemon_msg answer;
    ssize_t n = -1;

    if (shournal_fw_send(s, cwd, arg) == 0) {
        do
            n = recv(s, &answer, sizeof answer, 0);
        while (n < 0 && errno == EINTR);
    }
    (void)close(s);
    return n == (ssize_t)sizeof answer && answer.type == SHOURNAL_MSG_SPOOLED ? 0 : -1;
}

/* A daemon that answers at once takes the command line: 0 once spooled.
 * No waiting for one that is still starting (the forwarder does that).
 * Only shournal-suid's own hand-over. */
static inline int shournal_fw_forward_once(const char *cwd)
{
    struct sockaddr_un addr;
    int s;

    if (shournal_fw_daemon_addr(&addr) != 0 || (s = shournal_fw_connect(&addr)) < 0)
        return -1;
    return shournal_fw_hand_over(s, cwd, SHOURNAL_FORWARD_BY_HELPER);
}

#endif
