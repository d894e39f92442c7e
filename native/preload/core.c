/* The shell's state, the real libc functions behind the wrappers, and the
 * small helpers every section uses. */
#include "preload.h"

enum state g_state = ST_DISABLED;
pid_t g_shell_pid = -1;
int g_sock = -1, g_rootfd = -1, g_nsfd = -1, g_syncfd = -1;
int g_prev_sync = -1; /* sync socket to the previous command line's holder */
pid_t g_holder = -1, g_listener = -1;
int g_forked; /* the shell forked while the line ran: see do_cleanup in line.c */
int64_t g_start_ns;
uint8_t g_session[16];
uint8_t g_uuid[16]; /* the running command line's (see struct shournal_command) */
char g_seq[32];
char g_suid[PATH_MAX] = SHOURNAL_SUID_PATH;
char g_listener_path[PATH_MAX] = SHOURNAL_LISTENER_PATH;
char g_rundir[PATH_MAX];
char g_last_warning[256];
/* Inside a trigger the shell has stderr redirected to /dev/null: warnings
 * travel back in the response and the hook prints them. */
int g_in_trigger = 0;
char g_pending[512];
int g_textfd = -1;          /* command text written by the hook */
int g_text_is_history = 0;  /* bash: "  123  text" from `history 1` */

int (*real_open)(const char *, int, ...);
int (*real_open64)(const char *, int, ...);
int (*real_openat)(int, const char *, int, ...);
int (*real_openat64)(int, const char *, int, ...);
pid_t (*real_fork)(void);
int (*real_execve)(const char *, char *const[], char *const[]);
ssize_t (*real_getrandom)(void *, size_t, unsigned int);
ssize_t (*real_read)(int, void *, size_t);
int (*real_poll)(struct pollfd *, nfds_t, int);
int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                    const sigset_t *);

void resolve(void)
{
    if (real_open)
        return;
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_fork = dlsym(RTLD_NEXT, "fork");
    real_execve = dlsym(RTLD_NEXT, "execve");
    real_getrandom = dlsym(RTLD_NEXT, "getrandom");
    real_read = dlsym(RTLD_NEXT, "read");
    real_poll = dlsym(RTLD_NEXT, "poll");
    real_select = dlsym(RTLD_NEXT, "select");
    real_pselect = dlsym(RTLD_NEXT, "pselect");
    real_open = dlsym(RTLD_NEXT, "open");
}

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int is_shell(void) { return g_shell_pid > 0 && getpid() == g_shell_pid; }

/* Highest free descriptor below `below`, never 255 (bash's script fd). */
static int free_high_fd(int below)
{
    struct rlimit rl;
    int start = below;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)start > rl.rlim_cur)
        start = (int)rl.rlim_cur;
    for (int fd = start - 1; fd >= 30; fd--) {
        if (fd == 255)
            continue;
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            return fd;
    }
    return -1;
}

int move_high(int fd, int below, int cloexec)
{
    int target = free_high_fd(below), res;
    if (target < 0)
        return fd;
    res = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, target);
    if (res < 0)
        return fd;
    close(fd);
    if (!cloexec)
        fcntl(res, F_SETFD, 0);
    return res;
}

/* 1: readable, 0: not within `ms`, -1: poll failed */
int wait_readable(int fd, int ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    int64_t deadline = now_ns() + (int64_t)ms * 1000000;

    for (;;) {
        int left = (int)((deadline - now_ns()) / 1000000), rc;
        if (left <= 0)
            return 0;
        rc = poll(&pfd, 1, left);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* /proc/<pid>/stat read into buf, from the end of the command name on
 * (its last ")": every field after it is a number or a letter); NULL if
 * it cannot be read. */
char *proc_stat_fields(pid_t pid, char *buf, size_t size)
{
    char path[40];
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = real_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strrchr(buf, ')');
}

/* Does `pid` run (not a zombie: our helpers are orphans, and the process
 * that inherits them -- a container's first process -- may reap late)?
 * 0 with errno ESRCH or EPERM otherwise. */
int process_lives(pid_t pid)
{
    char buf[128], *paren;

    if (kill(pid, 0) != 0)
        return 0;
    paren = proc_stat_fields(pid, buf, sizeof buf);
    if (paren && paren[1] == ' ' && paren[2] == 'Z') {
        errno = ESRCH;
        return 0;
    }
    return 1;
}
