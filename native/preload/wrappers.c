/* The libc functions the library wraps: its only exports. */
#include "preload.h"

/* Callers may pass NULL where glibc declares nonnull (Linux accepts a NULL
 * argv for execve); the wrappers must check anyway. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"

#define MAGIC "_///shournal///_/"

/* Open `path` through the namespace's root so the open is observed. */
static int open_in_ns(const char *path, int flags, mode_t mode)
{
    char buf[PATH_MAX * 2];
    const char *rel;

    if (path[0] == '/') {
        rel = path;
    } else {
        size_t n;
        if (getcwd(buf, PATH_MAX) == NULL)
            return -2;
        n = strlen(buf);
        if (n + 1 + strlen(path) + 1 > sizeof buf)
            return -2;
        buf[n] = '/';
        strcpy(buf + n + 1, path);
        rel = buf;
    }
    while (*rel == '/')
        rel++;
    if (*rel == '\0')
        return -2; /* "/" itself */
    /* g_rootfd is the namespace's copy of our root, not our root: "..",
     * absolute symlinks and the like must resolve as if it were (a plain
     * openat would climb out of a chroot).  Magic links (/dev/stdout,
     * /dev/fd/N) are refused that way (EXDEV; ELOOP in other kernels):
     * those, and kernels or seccomp filters without openat2, take the
     * shell's own open. */
    {
        struct open_how how = {.flags = (uint64_t)(unsigned)flags,
                               .mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0,
                               .resolve = RESOLVE_IN_ROOT};
        int fd = (int)syscall(SYS_openat2, g_rootfd, rel, &how, sizeof how);
        if (fd < 0 && (errno == ELOOP || errno == EXDEV || errno == EAGAIN ||
                       errno == ENOSYS || errno == EINVAL || errno == EPERM))
            return -2;
        return fd;
    }
}

static int intercept(const char *path, int flags, mode_t mode, int *res)
{
    if (path == NULL)
        return 0;
    if (strncmp(path, MAGIC, sizeof MAGIC - 1) == 0) {
        *res = handle_trigger(path + sizeof MAGIC - 1);
        return 1;
    }
    if (g_state == ST_WITHIN && g_rootfd >= 0 && path[0] != '\0') {
        int fd = open_in_ns(path, flags, mode);
        if (fd != -2) {
            *res = fd;
            return 1;
        }
    }
    return 0;
}

#define MODE_ARG(flags, mode)                                                                      \
    do {                                                                                           \
        if ((flags) & (O_CREAT | __O_TMPFILE)) {                                                   \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            mode = (mode_t)va_arg(ap, int);                                                        \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)

EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    int res;
    MODE_ARG(flags, mode);
    resolve();
    if (intercept(path, flags, mode, &res))
        return res;
    return real_open(path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    int res;
    MODE_ARG(flags, mode);
    resolve();
    if (intercept(path, flags | O_LARGEFILE, mode, &res))
        return res;
    return real_open64(path, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    int res;
    MODE_ARG(flags, mode);
    resolve();
    if ((dirfd == AT_FDCWD || (path && path[0] == '/')) && intercept(path, flags, mode, &res))
        return res;
    return real_openat(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    int res;
    MODE_ARG(flags, mode);
    resolve();
    if ((dirfd == AT_FDCWD || (path && path[0] == '/')) &&
        intercept(path, flags | O_LARGEFILE, mode, &res))
        return res;
    return real_openat64(dirfd, path, flags, mode);
}

EXPORT int creat(const char *path, mode_t mode)
{
    return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
    return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* bash: PS0 bumps the exported _SHOURNAL_SEQ and then expands $SRANDOM,
 * which bash draws with getrandom(): a call from the shell itself with a
 * new counter value starts a command line, and its text comes from bash's
 * history in-process.  That saves the fork of a command substitution per
 * command line (~1 ms of CPU: the shell's page tables copied, its memory
 * write-protected and faulted back, the child's exit), which bash < 5.1
 * (no SRANDOM) and the emulated HISTIGNORE (bash code decides) still take:
 * see fork() and _shournal_ps0 in shell/shournal.bash. */
EXPORT ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    resolve();
    if (start_if_new_seq()) {
        send_start_from_history();
        prepare_if_typed_ahead();
    }
    if (real_getrandom)
        return real_getrandom(buf, len, flags);
    return syscall(SYS_getrandom, buf, len, flags);
}

/* bash, where PS0 forks its command substitution (see getrandom()): a fork
 * of the shell itself with a new counter value starts a command line; the
 * child sends the text. */
EXPORT pid_t fork(void)
{
    pid_t pid;
    int started;

    resolve();
    started = start_if_new_seq();
    pid = real_fork();
    /* A child forked at the prompt (a prompt's `$(...)`, an async prompt
     * worker) must not hold the next command line's socket: that command
     * line would not end before the child does. */
    if (pid == 0) {
        drop_next();
    } else {
        if (g_state == ST_WITHIN && is_shell())
            g_forked = 1; /* the child holds the control socket */
        if (pid > 0 && started)
            prepare_if_typed_ahead();
    }
    return pid;
}

EXPORT int execve(const char *filename, char *const argv[], char *const envp[])
{
    struct stat st;
    resolve();
    if (g_state == ST_WITHIN && is_shell() && g_sock >= 0) {
        /* `exec PROGRAM` ends the command line for the shell: no prompt
         * follows to report it.  Its end of the control socket must not
         * live on in the program (a new shell would keep the line open
         * for its whole session); the listener stores the line from its
         * START once the line's other processes are gone too. */
        int rc, saved;
        (void)fcntl(g_sock, F_SETFD, FD_CLOEXEC);
        rc = real_execve(filename, argv, envp);
        saved = errno;
        (void)fcntl(g_sock, F_SETFD, 0);
        errno = saved;
        return rc;
    }
    if (g_state != ST_WITHIN || is_shell() || filename == NULL)
        return real_execve(filename, argv, envp);
    if (stat(filename, &st) != 0 || (st.st_mode & (S_ISUID | S_ISGID))) {
        /* Setuid programs run unobserved, as in the original; they must not
         * keep the command line open either. */
        fcntl(g_sock, F_SETFD, FD_CLOEXEC);
        return real_execve(filename, argv, envp);
    }
    {
        size_t envc = 0, argc = 0, k = 0;
        char pidbuf[16], envcbuf[24], **nargv;
        while (envp && envp[envc])
            envc++;
        while (argv && argv[argc])
            argc++;
        nargv = malloc((6 + envc + argc + 1) * sizeof *nargv);
        if (nargv == NULL)
            return real_execve(filename, argv, envp);
        snprintf(pidbuf, sizeof pidbuf, "%d", (int)g_holder);
        snprintf(envcbuf, sizeof envcbuf, "%zu", envc);
        nargv[k++] = g_suid;
        nargv[k++] = "exec";
        nargv[k++] = pidbuf;
        nargv[k++] = (char *)filename;
        nargv[k++] = envcbuf;
        for (size_t i = 0; i < envc; i++)
            nargv[k++] = envp[i];
        if (argc == 0)
            nargv[k++] = (char *)filename;
        for (size_t i = 0; i < argc; i++)
            nargv[k++] = argv[i];
        nargv[k] = NULL;
        real_execve(g_suid, nargv, envp);
        warn_once("not recording: cannot run %s: %s", g_suid, strerror(errno));
        free(nargv);
    }
    return real_execve(filename, argv, envp);
}

/* Where the shell waits for input: see prepare_if_due() in prepared.c.
 * read() only from a terminal: the prompt's own hook reads our answer
 * with read. */
/* The next namespace is prepared when the shell waits for input (see
 * prepare_if_due in prepared.c), right after the prompt is drawn: where
 * a Ctrl-C lands.  The line editors' handlers (readline's, zle's) only
 * note a signal and act on the note when their wait returns EINTR; one
 * handled during the preparation (the helper's spawn takes milliseconds)
 * would leave the wait that follows blocked until the next key -- no new
 * prompt.  So the preparation runs with every signal blocked, and the wait
 * unblocks them atomically (pselect's or ppoll's mask): a signal that came
 * meanwhile interrupts it at once.  0: prepared so, `old` the mask to wait
 * with and to restore afterwards (restore_mask); -1: nothing was due. */
static int prepare_blocked(sigset_t *old)
{
    sigset_t all;

    if (!g_prepare_due || g_in_trigger || !is_shell())
        return -1;
    if (sigfillset(&all) != 0 || sigprocmask(SIG_BLOCK, &all, old) != 0) {
        prepare_if_due();
        return -1;
    }
    prepare_if_due();
    return 0;
}

static void restore_mask(const sigset_t *old)
{
    int saved = errno;

    (void)sigprocmask(SIG_SETMASK, old, NULL);
    errno = saved;
}

EXPORT ssize_t read(int fd, void *buf, size_t count)
{
    sigset_t old;

    resolve();
    if (g_prepare_due && isatty(fd)) {
        int flags = fcntl(fd, F_GETFL);
        struct pollfd pfd = {fd, POLLIN, 0};
        int rc;

        if (prepare_blocked(&old) == 0) {
            /* a blocking read waits here, where signals are unblocked
             * atomically; a non-blocking one does not wait */
            rc = flags >= 0 && !(flags & O_NONBLOCK) ? ppoll(&pfd, 1, NULL, &old) : 1;
            restore_mask(&old);
            if (rc < 0)
                return -1; /* EINTR: as the read would have */
        }
    }
    return real_read(fd, buf, count);
}

EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    sigset_t old;

    resolve();
    if (g_prepare_due && prepare_blocked(&old) == 0) {
        struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000};
        int rc = ppoll(fds, nfds, timeout < 0 ? NULL : &ts, &old);
        restore_mask(&old);
        return rc;
    }
    return real_poll(fds, nfds, timeout);
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
    sigset_t old;

    resolve();
    if (g_prepare_due && prepare_blocked(&old) == 0) {
        struct timespec ts, t0, t1;
        int rc;

        if (timeout != NULL) {
            ts.tv_sec = timeout->tv_sec;
            ts.tv_nsec = (long)timeout->tv_usec * 1000;
        }
        (void)clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = real_pselect(nfds, r, w, e, timeout != NULL ? &ts : NULL, &old);
        restore_mask(&old);
        if (timeout != NULL && clock_gettime(CLOCK_MONOTONIC, &t1) == 0) {
            /* as Linux's select, the time left */
            int64_t left = ((int64_t)ts.tv_sec - (t1.tv_sec - t0.tv_sec)) * 1000000000 +
                           (ts.tv_nsec - (t1.tv_nsec - t0.tv_nsec));
            if (left < 0)
                left = 0;
            timeout->tv_sec = (time_t)(left / 1000000000);
            timeout->tv_usec = (suseconds_t)(left % 1000000000 / 1000);
        }
        return rc;
    }
    return real_select(nfds, r, w, e, timeout);
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout,
                   const sigset_t *mask)
{
    sigset_t old;

    resolve();
    if (g_prepare_due && prepare_blocked(&old) == 0) {
        int rc = real_pselect(nfds, r, w, e, timeout, mask != NULL ? mask : &old);
        restore_mask(&old);
        return rc;
    }
    return real_pselect(nfds, r, w, e, timeout, mask);
}
