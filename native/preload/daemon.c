/* The relay to the store daemon: the shell starts it when none answers. */
#include "preload.h"

/* The store daemon (shournal/capture/daemon.py), when the listener is its
 * forwarder (native/shournal_forward.c): the forwarder runs inside the
 * command line's mount namespace, where a daemon it started would stay for
 * good (pinning the namespace, its own writes observed by that command
 * line), so the shell starts it, from its own namespace, when none answers
 * on <rundir>/daemon.<journal key>.sock -- through `shournal-forward --start-daemon`,
 * which detaches it (it is not our child) and exits.  A failed connect
 * costs microseconds.  While a start of ours is under way (a Python
 * daemon needs ~0.2 s, seconds on a busy machine) the next command lines
 * do not start more, for at most DAEMON_RESPAWN_MS; it is over as soon as
 * a daemon has taken the lock (it rewrites the lock file): one that died
 * since then (killed, crashed, idle) is started again at once, whatever
 * the time since the last start.  The forwarder waits (bounded) for the
 * daemon to come up. */
#define FORWARDER_NAME "shournal-forward"
#ifndef DAEMON_RESPAWN_MS /* a test builds a variant with a longer one */
#define DAEMON_RESPAWN_MS 1000
#endif

int uses_daemon(void)
{
    const char *base = strrchr(g_listener_path, '/');
    return base && strcmp(base + 1, FORWARDER_NAME) == 0;
}

/* The journal key of the daemon ensure_daemon last looked for: one daemon
 * per journal (see SHOURNAL_DAEMON_SOCKET). */
static char g_daemon_key[SHOURNAL_KEY_LEN + 1];

/* <rundir>/daemon.<key>.lock into buf; 0, or -1 if it does not fit. */
static int daemon_lock_path(char *buf, size_t n)
{
    return (size_t)snprintf(buf, n, "%s/" SHOURNAL_DAEMON_LOCK, g_rundir, g_daemon_key) < n
               ? 0
               : -1;
}

/* What identifies a write of the daemon lock (zero if there is none). */
static void daemon_lock_state(struct stat *st)
{
    char path[PATH_MAX + 32];

    if (daemon_lock_path(path, sizeof path) != 0 || stat(path, st) != 0)
        memset(st, 0, sizeof *st);
}

static int same_write(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The daemon a connect found up, as a pidfd: while it has not exited and
 * its socket is still named, the next command lines need no connect --
 * which would wake the daemon (its accept loop, in Python) on every line.
 * Its pid is in the lock file, written before it binds the socket: read
 * after a connect succeeded, it names that daemon (or a later one). */
static int g_daemon_pidfd = -1;

static int daemon_known_up(const char *sock_path)
{
    struct pollfd p = {g_daemon_pidfd, POLLIN, 0};
    struct stat st;

    if (g_daemon_pidfd < 0)
        return 0;
    /* readable: it exited; a daemon leaving (idle) removes its socket's
     * name first */
    if (poll(&p, 1, 0) == 0 && lstat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode))
        return 1;
    close(g_daemon_pidfd);
    g_daemon_pidfd = -1;
    return 0;
}

static void remember_daemon(void)
{
#ifdef SYS_pidfd_open
    char path[PATH_MAX + 32], buf[32];
    ssize_t n;
    long pid;
    char *end;
    int fd;

    if (daemon_lock_path(path, sizeof path) != 0)
        return;
    fd = real_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    pid = strtol(buf, &end, 10);
    if (pid <= 0 || pid > INT_MAX || (*end != '\n' && *end != '\0'))
        return;
    fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0); /* close-on-exec */
    if (fd >= 0)
        g_daemon_pidfd = move_high(fd, 1024, 1);
#endif
}

void ensure_daemon(void)
{
    static int64_t last_start;
    static struct stat lock_at_start;
    struct stat lock_now;
    struct sockaddr_un addr;
    char *args[] = {g_listener_path, "--start-daemon", NULL}, key[SHOURNAL_KEY_LEN + 1], **env;
    int s, rc, up;

    if (!g_rundir[0] || !uses_daemon())
        return;
    shournal_journal_key(key);
    if (strcmp(key, g_daemon_key) != 0) { /* another journal: its own daemon */
        memcpy(g_daemon_key, key, sizeof key);
        if (g_daemon_pidfd >= 0)
            close(g_daemon_pidfd);
        g_daemon_pidfd = -1;
        last_start = 0;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/" SHOURNAL_DAEMON_SOCKET,
                         g_rundir, key) >= sizeof addr.sun_path)
        return;
    if (daemon_known_up(addr.sun_path))
        return;
    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    up = connect(s, (struct sockaddr *)&addr, sizeof addr) == 0;
    close(s);
    if (up) {
        remember_daemon();
        return;
    }
    daemon_lock_state(&lock_now);
    if (last_start && now_ns() - last_start < (int64_t)DAEMON_RESPAWN_MS * 1000000 &&
        same_write(&lock_now, &lock_at_start))
        return;
    last_start = now_ns();
    lock_at_start = lock_now;
    env = child_env(NULL);
    rc = spawn_detached(g_listener_path, args, env ? env : environ, -1, -1);
    free(env);
    if (rc != 0)
        warn_once("cannot start the store daemon: %s: %s", g_listener_path, strerror(rc));
}
