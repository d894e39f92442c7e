/* libshournal_preload.so: loaded into the interactive bash or zsh only.
 *
 * The shell integration talks to it by opening magic paths
 * ("_///shournal///_/<action>"), which costs no fork.  When a command line
 * starts, the library asks the setuid helper for a fresh mount namespace
 * whose mounts are fanotify-marked.  While the command line runs:
 *   - the shell's own opens (redirections, `source`) go through a directory
 *     fd of the namespace's root, so they are observed;
 *   - every program a forked child executes enters the namespace through
 *     the helper's exec trampoline;
 *   - every process holds a copy of the control socket, so the listener sees
 *     EOF only when the last process of the command line has exited.
 *
 * Nothing here may break the shell: every failure falls back to the real
 * libc call and at most one short warning.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "shournal_fdpass.h"
#include "shournal_forward.h"
#include "shournal_protocol.h"

/* Callers may pass NULL where glibc declares nonnull (Linux accepts a NULL
 * argv for execve); the wrappers must check anyway. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"

#ifndef SHOURNAL_SUID_PATH
#define SHOURNAL_SUID_PATH "/usr/local/libexec/shournal/shournal-suid"
#endif
#ifndef SHOURNAL_LISTENER_PATH
#define SHOURNAL_LISTENER_PATH "/usr/local/libexec/shournal/shournal-listener"
#endif

#define MAGIC "_///shournal///_/"
#define SETUP_TIMEOUT_MS 5000
#define GO_ACK_TIMEOUT_MS 1000
/* An idle shell gives its prepared namespace (one fanotify group of the
 * user's fs.fanotify.max_user_groups) back after this long. */
#define PREPARED_IDLE_S "600"

#define EXPORT __attribute__((visibility("default")))

enum state { ST_DISABLED, ST_IDLE, ST_WITHIN };

static enum state g_state = ST_DISABLED;
static pid_t g_shell_pid = -1;
static int g_sock = -1, g_rootfd = -1, g_nsfd = -1, g_syncfd = -1;
static int g_prev_sync = -1; /* sync socket to the previous command line's holder */
static pid_t g_holder = -1, g_listener = -1;
static int g_forked; /* the shell forked while the line ran: see do_cleanup */
static int64_t g_start_ns;
static uint8_t g_session[16];
static char g_seq[32];
static char g_suid[PATH_MAX] = SHOURNAL_SUID_PATH;
static char g_listener_path[PATH_MAX] = SHOURNAL_LISTENER_PATH;
static char g_rundir[PATH_MAX];
static char g_last_warning[256];
/* Inside a trigger the shell has stderr redirected to /dev/null: warnings
 * travel back in the response and the hook prints them. */
static int g_in_trigger = 0;
static char g_pending[512];
static int g_textfd = -1;          /* command text written by the hook */
static int g_text_is_history = 0;  /* bash: "  123  text" from `history 1` */
/* The namespaces prepared at the prompt for the next command lines (see
 * prepare_next), in the order they are taken, and what they were prepared
 * for (all of them at once). */
#define MAX_NEXT 2
static int g_next_socks[MAX_NEXT];
static int g_next_n;
static char g_next_cwd[PATH_MAX];
static struct stat g_next_args;
static char g_next_key[SHOURNAL_KEY_LEN + 1]; /* their journal (see child_env) */
static int g_mounts_fd = -1; /* /proc/self/mounts: polls POLLPRI on (u)mounts */
/* <data dir>/shournal/spool/<journal key>/starts (O_PATH): the command
 * lines' starts on disk (see write_start_file); -1: none are kept.  The
 * journal key it is of (see child_env). */
static int g_startsfd = -1;
static char g_starts_key[SHOURNAL_KEY_LEN + 1];

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static pid_t (*real_fork)(void);
static int (*real_execve)(const char *, char *const[], char *const[]);
static ssize_t (*real_getrandom)(void *, size_t, unsigned int);
static ssize_t (*real_read)(int, void *, size_t);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                           const sigset_t *);

/* bash's own functions and variables (bash exports its symbols for
 * loadable builtins): its history (readline's API; HIST_ENTRY begins with
 * the line) and its shell variables, read in-process by the fork-free start
 * of a command line (see getrandom()).  NULL in zsh. */
struct bash_hist_entry {
    char *line;
};
static struct bash_hist_entry *(*bash_history_get)(int);
static int *bash_history_base, *bash_history_length;
static char *(*bash_get_string_value)(const char *);
/* bash's HISTCONTROL as it parsed it (bashhist.c, history_control):
 * HC_IGNSPACE is its bit 0x01.  See hold_ignorespace(). */
static int *bash_history_control;
#define BASH_HC_IGNSPACE 0x01

static void resolve(void)
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

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One line, only when it differs from the previous one: a broken recorder
 * must not drown the user's terminal. */
static void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_once(const char *fmt, ...)
{
    char buf[sizeof g_last_warning];
    va_list ap;
    int saved = errno;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strcmp(buf, g_last_warning) != 0) {
        memcpy(g_last_warning, buf, sizeof buf);
        if (g_in_trigger) {
            size_t used = strlen(g_pending);
            snprintf(g_pending + used, sizeof g_pending - used, "shournal: %s\n", buf);
        } else {
            dprintf(STDERR_FILENO, "shournal: %s\n", buf);
        }
    }
    errno = saved;
}

static int is_shell(void) { return g_shell_pid > 0 && getpid() == g_shell_pid; }

static void b64(const uint8_t *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i, o = 0;
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = t[v >> 6 & 63];
        out[o++] = t[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

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

static int move_high(int fd, int below, int cloexec)
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

static void marker_path(char *buf, size_t n, pid_t pid, const char *suffix)
{
    snprintf(buf, n, "%s/%d.%s", g_rundir, (int)pid, suffix);
}

/* ------------------------------------------------------------- prepare */

#define MAX_PENDING_LISTENERS 8
#define MAX_PENDING_WAIT_MS 2000
/* flags, --hash, --archive-max-size, excludes, extensions and names with values */
#define SETUP_MAX_OPTS (4 + 2 + 2 + 2 * SHOURNAL_MAX_EXCLUDES + 2 * SHOURNAL_MAX_ARCHIVE_EXT)
#define SETUP_ARGS_MAX 16384

static int one_of(const char *p, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p, list[i]) == 0)
            return 1;
    return 0;
}

/* The helper options setup-args may hold: flags, and options with a value. */
static const char *const g_flag_opts[] = {"--no-read", "--writable-reads", "--no-hash",
                                          "--no-archive"};
static const char *const g_valued_opts[] = {"--exclude-mount", "--hash", "--archive-max-size",
                                            "--archive-ext", "--archive-name"};
#define N_OPTS(a) (sizeof(a) / sizeof((a)[0]))

/* A NUL separated list the listener left in the runtime directory, read
 * into buf (SETUP_ARGS_MAX + 1 bytes): its length, or 0 when it is absent,
 * not a regular file of ours, empty or not NUL terminated. */
static ssize_t read_nul_list(const char *path, char *buf)
{
    struct stat st;
    ssize_t len;
    int fd = real_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0)
        return 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        close(fd);
        return 0;
    }
    len = read(fd, buf, SETUP_ARGS_MAX);
    close(fd);
    return len > 0 && buf[len - 1] == '\0' ? len : 0;
}

/* Is the working directory at or below one of [apparatus] paths (the
 * listener leaves them in <rundir>/apparatus-paths, NUL separated)? */
static int cwd_in_apparatus_paths(void)
{
    static char buf[SETUP_ARGS_MAX + 1];
    char path[PATH_MAX + 32], cwd[PATH_MAX];
    ssize_t len;

    snprintf(path, sizeof path, "%s/" SHOURNAL_APPARATUS_PATHS_FILE, g_rundir);
    len = read_nul_list(path, buf);
    if (len == 0 || getcwd(cwd, sizeof cwd) == NULL)
        return 0;
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        size_t n = strlen(p);
        if (n > 1 && strncmp(cwd, p, n) == 0 && (cwd[n] == '\0' || cwd[n] == '/'))
            return 1;
    }
    return 0;
}

/* The helper options of the next command line: <rundir>/setup-args.<this
 * shell's pid> after `shournal apparatus on`, setup-args.apparatus in a
 * directory of [apparatus] paths, else setup-args (all written by shournal,
 * see shournal.reproduce). */
static int setup_args_path(char *path, size_t size)
{
    struct stat st;

    snprintf(path, size, "%s/" SHOURNAL_SETUP_ARGS_FILE ".%ld", g_rundir, (long)getpid());
    if (lstat(path, &st) == 0)
        return 1;
    if (cwd_in_apparatus_paths()) {
        snprintf(path, size, "%s/" SHOURNAL_SETUP_ARGS_APPARATUS_FILE, g_rundir);
        if (lstat(path, &st) == 0)
            return 1;
    }
    snprintf(path, size, "%s/" SHOURNAL_SETUP_ARGS_FILE, g_rundir);
    return 0;
}

/* Set by setup_args_from_config: the options are the apparatus's, which
 * the listener learns from the helper's environment (it inherits it). */
static int g_args_apparatus;
static char g_apparatus_env[] = "SHOURNAL_APPARATUS_SHELL=1";

/* The listener, which reads the config, leaves the helper options derived
 * from it in <rundir>/setup-args (NUL separated); a config change thus
 * takes effect from the next command line on.  Anything unexpected is
 * ignored: the helper validates its argv again anyway. */
static int setup_args_from_config(char *buf, char **out, int max)
{
    char path[PATH_MAX + 32];
    ssize_t len;
    int n = 0, excludes = 0;

    g_args_apparatus = 0;
    if (!g_rundir[0])
        return 0;
    if (setup_args_path(path, sizeof path))
        g_args_apparatus = 1;
    len = read_nul_list(path, buf);
    if (len == 0)
        return 0;
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        int valued = one_of(p, g_valued_opts, N_OPTS(g_valued_opts));
        if (one_of(p, g_flag_opts, N_OPTS(g_flag_opts)) && n < max) {
            out[n++] = p;
        } else if (valued && n + 2 <= max && p + strlen(p) + 1 < buf + len &&
                   (strcmp(p, "--exclude-mount") != 0 ||
                    (excludes++ < SHOURNAL_MAX_EXCLUDES && p[strlen(p) + 1] == '/'))) {
            out[n++] = p;
            p += strlen(p) + 1;
            out[n++] = p;
        } else {
            return 0; /* not ours: use the defaults */
        }
    }
    return n;
}

/* What the shell may ignore or catch: default again in what it spawns. */
static const int g_default_sigs[] = {SIGINT,  SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN,
                                     SIGTTOU, SIGPIPE, SIGCHLD, SIGHUP};

/* Start a program of ours (the setup helper, the daemon starter) from the
 * shell, as no child of the shell's.  zsh's SIGCHLD handler has no
 * SA_RESTART: a SIGCHLD interrupts whatever zsh writes then -- the next
 * prompt, lost, as a listener ends when its command line does -- and bash
 * runs the user's CHLD trap for each.  So a first child, made with no exit
 * signal, starts the program as its own child and exits at once: the
 * program is then an orphan (init or the nearest subreaper reaps it), and
 * the shell reaps the first child here, with __WCLONE (a child without an
 * exit signal is invisible to the shells' waits).  An exec always sends
 * SIGCHLD again, hence the two steps.
 * Not with fork(): a fork write-protects all of the shell's memory, which
 * then takes a page fault on every page it touches next (~1.5 ms before
 * the prompt on a 2-vCPU VM); clone(CLONE_VM|CLONE_VFORK) copies nothing,
 * as posix_spawn does.  The program runs in a session of its own, with
 * default signals, nothing open but /dev/null on 0-2, `sock` as
 * SHOURNAL_FD_SOCKET and `spare` as SHOURNAL_FD_SPARE; none of our
 * wrappers run (raw execve). */
struct spawn_req {
    const char *path;
    char *const *argv;
    char *const *envp;
    int sock;  /* -1: none */
    int spare; /* -1: none; only with sock */
    int err;  /* errno of the step that failed */
};

static char g_spawn_stack[2][32 * 1024] __attribute__((aligned(16)));

static int spawn_exec(void *arg)
{
    struct spawn_req *r = arg;
    sigset_t none;

    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) == 0)
        syscall(SYS_execve, r->path, r->argv, r->envp);
    r->err = errno ? errno : EINVAL;
    _exit(127);
}

static int spawn_first(void *arg)
{
    struct spawn_req *r = arg;
    struct sigaction dfl, old;
    int fd, last = 2;

    /* The shell's handlers live in the memory we share: none may run here
     * or in the program before its exec.  The parent blocked every signal. */
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &old) != 0)
            continue;
        if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN &&
            sigaction(sig, &dfl, NULL) != 0)
            goto fail;
    }
    for (size_t i = 0; i < sizeof g_default_sigs / sizeof g_default_sigs[0]; i++)
        if (sigaction(g_default_sigs[i], &dfl, NULL) != 0)
            goto fail;
    if (setsid() < 0)
        goto fail;
    fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR);
    if (fd < 0)
        goto fail;
    for (int i = 0; i <= 2; i++)
        if (dup2(fd, i) < 0)
            goto fail;
    if (r->sock >= 0) {
        if (dup2(r->sock, SHOURNAL_FD_SOCKET) < 0)
            goto fail;
        last = SHOURNAL_FD_SOCKET;
    }
    if (r->sock >= 0 && r->spare >= 0) {
        if (dup2(r->spare, SHOURNAL_FD_SPARE) < 0)
            goto fail;
        last = SHOURNAL_FD_SPARE;
    }
    if (syscall(SYS_close_range, last + 1, ~0U, 0) != 0)
        goto fail;
    if (clone(spawn_exec, g_spawn_stack[1] + sizeof g_spawn_stack[1],
              CLONE_VM | CLONE_VFORK | SIGCHLD, r) < 0)
        goto fail;
    _exit(0);
fail:
    r->err = errno ? errno : EINVAL;
    _exit(127);
}

/* 0, or an errno value */
static int spawn_detached(const char *path, char *const argv[], char *const envp[], int sock,
                          int spare)
{
    struct spawn_req r = {path, argv, envp, sock, spare, 0};
    sigset_t all, old;
    pid_t pid;
    int err;

    sigfillset(&all);
    if (sigprocmask(SIG_BLOCK, &all, &old) != 0)
        return errno;
    pid = clone(spawn_first, g_spawn_stack[0] + sizeof g_spawn_stack[0], CLONE_VM | CLONE_VFORK,
                &r);
    if (pid < 0) {
        err = errno;
    } else {
        err = r.err;
        while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
            ;
    }
    if (sigprocmask(SIG_SETMASK, &old, NULL) != 0 && err == 0)
        err = errno;
    return err;
}

static int uses_daemon(void);

/* The environment for the helper and the store daemon: environ with the
 * current values of the variables that decide the command line's journal
 * (shournal_journal_key), which bash keeps out of environ once exported
 * at its prompt (it builds each child's environment itself; its getenv()
 * sees them) -- so that the helper, the forwarder, the daemon and the
 * Python listener resolve the journal the line's own programs resolve.
 * `first` (or NULL) goes first.  One block: free() it.  NULL when out of
 * memory (the caller uses environ). */
static const char *const g_key_vars[] = {"SHOURNAL_DB_URL", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                         "HOME"};
#define N_KEY_VARS (sizeof g_key_vars / sizeof g_key_vars[0])

static int is_key_var(const char *entry)
{
    for (size_t i = 0; i < N_KEY_VARS; i++) {
        size_t len = strlen(g_key_vars[i]);
        if (strncmp(entry, g_key_vars[i], len) == 0 && entry[len] == '=')
            return 1;
    }
    return 0;
}

static char **child_env(char *first)
{
    const char *vals[N_KEY_VARS];
    size_t count = 0, text = 0, n = 0, i;
    char **env, *p;

    while (environ[count])
        count++;
    for (i = 0; i < N_KEY_VARS; i++) {
        vals[i] = getenv(g_key_vars[i]);
        if (vals[i])
            text += strlen(g_key_vars[i]) + strlen(vals[i]) + 2;
    }
    env = malloc((count + N_KEY_VARS + 2) * sizeof *env + text);
    if (env == NULL)
        return NULL;
    p = (char *)(env + count + N_KEY_VARS + 2);
    if (first)
        env[n++] = first;
    for (i = 0; i < N_KEY_VARS; i++) {
        if (vals[i] == NULL)
            continue;
        env[n++] = p;
        p += sprintf(p, "%s=%s", g_key_vars[i], vals[i]) + 1;
    }
    for (i = 0; i < count; i++)
        if (!is_key_var(environ[i]))
            env[n++] = environ[i];
    env[n] = NULL;
    return env;
}

/* `*spare` (a socket, or -1) is set to -1 if the helper is not to set up
 * a spare namespace on it (see prepare_next): the caller closes it. */
static int spawn_helper(int sock, int *spare, int prepared, char *why, size_t whylen)
{
    /* "setup" [OPTIONS from setup-args] "--lazy-listener" ["--forward"]
     * ["--prepared" S ["--spare"]] "--" LISTENER */
    char *args[2 + SETUP_MAX_OPTS + 7 + 1];
    static char extra[SETUP_ARGS_MAX + 1];
    int n = 0, rc;

    args[n++] = g_suid;
    args[n++] = "setup";
    n += setup_args_from_config(extra, args + n, SETUP_MAX_OPTS);
    /* Python starts when the command line has ended (or has many events),
     * not next to a short command */
    args[n++] = "--lazy-listener";
    /* The helper hands the line to the daemon itself -- except with the
     * apparatus: the daemon reads the shell's environment for its manifest
     * from /proc/<listener>/environ, which a process that was setuid root
     * does not show the user; shournal-forward, exec'd, does. */
    if (uses_daemon() && !g_args_apparatus)
        args[n++] = "--forward";
    if (prepared) {
        args[n++] = "--prepared";
        args[n++] = PREPARED_IDLE_S;
    }
    /* Only where nothing but the working directory is taken from the time
     * of the set-up (which the shell compares): the Python listener and
     * the apparatus get the shell's environment at that time, and a spare
     * is taken a command line later. */
    if (*spare >= 0 && prepared && uses_daemon() && !g_args_apparatus)
        args[n++] = "--spare";
    else
        *spare = -1;
    args[n++] = "--";
    args[n++] = g_listener_path;
    args[n] = NULL;

    {
        /* with the apparatus switch first when the options are the
         * apparatus's (any inherited one is overridden: getenv takes the
         * first) */
        char **env = child_env(g_args_apparatus ? g_apparatus_env : NULL);
        /* `sock` and `*spare` are never 0-4 (see control_socket) */
        rc = spawn_detached(g_suid, args, env ? env : environ, sock, *spare);
        free(env);
    }
    if (rc != 0)
        snprintf(why, whylen, "cannot run %.300s: %s", g_suid, strerror(rc));
    return rc == 0 ? 0 : -1;
}

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

static int uses_daemon(void)
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

static void ensure_daemon(void)
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

/* 1: readable, 0: not within `ms`, -1: poll failed */
static int wait_readable(int fd, int ms)
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

static int recv_setup(int sock, struct shournal_setup_done *done, int *rootfd, int *nsfd,
                      int *syncfd, char *why, size_t whylen)
{
    int fds[3] = {-1, -1, -1};
    char buf[sizeof(struct shournal_setup_fail) + SHOURNAL_MAX_FAIL_LEN + 1];
    ssize_t n;
    int rc;

    *rootfd = -1;
    rc = wait_readable(sock, SETUP_TIMEOUT_MS);
    if (rc < 0) {
        snprintf(why, whylen, "poll: %s", strerror(errno));
        return -1;
    }
    if (rc == 0) {
        snprintf(why, whylen, "helper did not answer");
        return -1;
    }
    n = shournal_recv_fds(sock, buf, sizeof buf - 1, fds, 3, MSG_CMSG_CLOEXEC);
    *rootfd = fds[0];
    *nsfd = fds[1];
    *syncfd = fds[2];
    if (n >= (ssize_t)sizeof *done && ((struct shournal_setup_done *)buf)->type ==
                                          SHOURNAL_MSG_SETUP_DONE && fds[0] >= 0 && fds[1] >= 0 &&
        fds[2] >= 0) {
        memcpy(done, buf, sizeof *done);
        return 0;
    }
    for (int k = 0; k < 3; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    if (n >= (ssize_t)sizeof(struct shournal_setup_fail) &&
        ((struct shournal_setup_fail *)buf)->type == SHOURNAL_MSG_SETUP_FAIL) {
        buf[n] = '\0';
        snprintf(why, whylen, "%.400s", buf + sizeof(struct shournal_setup_fail));
    } else if (n == 0) {
        snprintf(why, whylen, "helper %.300s failed to start", g_suid);
    } else {
        snprintf(why, whylen, "bad answer from helper");
    }
    return -1;
}

/* The holder takes each file's metadata and hash when it reads the close
 * event: a command line that overwrites what the previous one wrote must
 * not start before the previous holder has read all its events (pasted
 * lines, fast typists).  One round trip to C code, bounded, so a hung
 * holder never holds the prompt. */
static void sync_previous_holder(void)
{
    struct pollfd pfd = {g_prev_sync, POLLIN, 0};
    int64_t deadline = now_ns() + (int64_t)SHOURNAL_SYNC_TIMEOUT_MS * 1000000;
    char c = 's';

    if (g_prev_sync < 0)
        return;
    if (send(g_prev_sync, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
        for (;;) {
            int left = (int)((deadline - now_ns()) / 1000000);
            if (left <= 0 || poll(&pfd, 1, left) > 0 || errno != EINTR)
                break;
        }
    }
    close(g_prev_sync);
    g_prev_sync = -1;
}

/* /proc/<pid>/stat read into buf, from the end of the command name on
 * (its last ")": every field after it is a number or a letter); NULL if
 * it cannot be read. */
static char *proc_stat_fields(pid_t pid, char *buf, size_t size)
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
static int process_lives(pid_t pid)
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

static int start_file_of(long pid);

/* Listeners of finished command lines still storing (markers <pid>.end and
 * <pid>.store of live processes, from every shell of this user).  A marker
 * of a dead process is a listener that died without storing (it removes its
 * markers whenever it ends by itself): the listener starts after its
 * command line has ended (--lazy-listener), so this is where such a death
 * is noticed -- one warning, by the shell that removes the marker. */
static int pending_listeners(void)
{
    DIR *d = opendir(g_rundir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 0 ||
            (strcmp(end, "." SHOURNAL_MARK_END) != 0 && strcmp(end, "." SHOURNAL_MARK_STORE) != 0))
            continue;
        /* our listeners run as us: EPERM is a reused pid, not one */
        if (process_lives((pid_t)pid)) {
            n++;
        } else if ((errno == ESRCH || errno == EPERM) && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            /* Said even when the start is on disk (whoever stores the line
             * from there names it too): a listener that cannot run at all
             * must not lose every line silently. */
            if (start_file_of(pid))
                warn_once("the recorder of an earlier command line died; its start is kept on "
                          "disk, to be stored as incomplete by the next listener or store daemon");
            else
                warn_once("the recorder of an earlier command line died; it was not recorded");
        }
    }
    closedir(d);
    return n;
}

/* Pasted lines do not wait for listeners, only for holders: without a
 * bound, a paste of 100 quick lines would run 100 Python listeners at
 * once.  Past a handful, let them catch up (bounded: never hold a prompt
 * for long). */
static void throttle_listeners(void)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    int64_t deadline = now_ns() + (int64_t)MAX_PENDING_WAIT_MS * 1000000;

    if (!g_rundir[0])
        return;
    while (pending_listeners() >= MAX_PENDING_LISTENERS && now_ns() < deadline)
        nanosleep(&ts, NULL);
}

/* A control socket: our end returned, the helper's in *child (above 0-4,
 * so that the spawn's dup2s onto fds 3 and 4 are never no-ops); -1. */
static int control_socket(int *child, char *why, size_t whylen)
{
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, whylen, "socketpair: %s", strerror(errno));
        return -1;
    }
    *child = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    if (*child < 0) {
        snprintf(why, whylen, "fcntl: %s", strerror(errno));
        close(sv[0]);
        return -1;
    }
    return sv[0];
}

/* Start the helper; our end of its control socket, or -1.  With `spare`
 * (prepared only), *spare is our end of a spare namespace's control
 * socket, or -1 if the helper sets up none. */
static int start_helper(int prepared, int *spare, char *why, size_t whylen)
{
    int child, ours, spare_child = -1, spare_ours = -1, passed;

    ours = control_socket(&child, why, whylen);
    if (ours < 0)
        return -1;
    if (spare)
        spare_ours = control_socket(&spare_child, why, whylen); /* -1: one alone */
    passed = spare_child;
    if (spawn_helper(child, &passed, prepared, why, whylen) != 0) {
        close(ours);
        ours = -1;
        passed = -1;
    }
    close(child);
    if (spare_child >= 0)
        close(spare_child);
    if (spare_ours >= 0 && passed < 0) {
        close(spare_ours);
        spare_ours = -1;
    }
    if (spare)
        *spare = spare_ours;
    return ours;
}

static void args_file_state(struct stat *st)
{
    char path[PATH_MAX + 32];

    memset(st, 0, sizeof *st);
    if (g_rundir[0]) {
        setup_args_path(path, sizeof path);
        if (stat(path, st) != 0)
            memset(st, 0, sizeof *st);
    }
}

static int next_still_fits(void);
static void drop_next(void);

/* The set-up (a setuid exec, unshare, fanotify group and marks, the
 * holder) is most of what recording adds to a command line: do it while
 * the prompt waits for the user, and only check at the next command line
 * that the namespace still fits -- same working directory (the listener
 * got it), same helper options (setup-args), no mount or umount since
 * (new mounts would lack marks).  Otherwise it is dropped and set up the
 * usual way.
 * One exec of the helper prepares two namespaces (--spare) where the
 * second one can wait a command line: the line after next takes it if
 * it still fits, and the prompt in between starts no helper. */
static void prepare_next(void)
{
    char why[SHOURNAL_MAX_FAIL_LEN];
    struct pollfd pfd = {g_mounts_fd, POLLPRI, 0};
    int fd, spare = -1;

    if (g_state == ST_DISABLED || g_mounts_fd < 0 || !is_shell())
        return;
    if (g_next_n > 0) {
        if (next_still_fits())
            return;
        drop_next();
    }
    if (getcwd(g_next_cwd, sizeof g_next_cwd) == NULL)
        return;
    args_file_state(&g_next_args);
    shournal_journal_key(g_next_key);
    (void)poll(&pfd, 1, 0); /* forget (u)mounts made before now */
    fd = start_helper(1, &spare, why, sizeof why);
    if (fd < 0) /* a failure shows when the usual set-up repeats it */
        return;
    g_next_socks[g_next_n++] = move_high(fd, 1024, 1);
    if (spare >= 0)
        g_next_socks[g_next_n++] = move_high(spare, g_next_socks[0], 1);
}

/* More input waits on the terminal when a command line starts (pasted
 * lines, typed ahead): the next line's namespace is prepared at once, next
 * to this line, instead of at the next prompt, where that line would wait
 * for it.  (A line that changes directory leaves it unfit: dropped.) */
static void prepare_if_typed_ahead(void)
{
    int pending = 0;

    if (ioctl(STDIN_FILENO, FIONREAD, &pending) == 0 && pending > 0)
        prepare_next();
}

/* The prompt's hook (cleanup) only notes that the next namespace is due;
 * it is prepared when the shell next waits for input -- bash's readline in
 * pselect(), zsh's line editor in read() from the terminal -- so that the
 * prompt is drawn first: the spawn waits for the setuid helper's exec,
 * which the user would otherwise wait for on every line (most of the
 * latency shournal added: docs/benchmarks.md).  A shell that starts a
 * command line without waiting (a key binding's widget) sets up the usual
 * way. */
static int g_prepare_due;

static void prepare_if_due(void)
{
    int saved = errno;

    if (g_prepare_due && is_shell() && !g_in_trigger) {
        g_prepare_due = 0;
        prepare_next();
    }
    errno = saved;
}

static void drop_next(void)
{
    while (g_next_n > 0) /* a helper sees EOF before GO: it just exits */
        close(g_next_socks[--g_next_n]);
}

static int next_still_fits(void)
{
    char cwd[PATH_MAX], key[SHOURNAL_KEY_LEN + 1];
    struct stat st;
    struct pollfd pfd = {g_mounts_fd, POLLPRI, 0};

    if (getcwd(cwd, sizeof cwd) == NULL || strcmp(cwd, g_next_cwd) != 0)
        return 0;
    /* prepared for another journal: its helper would hand the line to
     * that journal's daemon */
    shournal_journal_key(key);
    if (strcmp(key, g_next_key) != 0)
        return 0;
    args_file_state(&st);
    if (st.st_dev != g_next_args.st_dev || st.st_ino != g_next_args.st_ino ||
        st.st_size != g_next_args.st_size ||
        st.st_mtim.tv_sec != g_next_args.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != g_next_args.st_mtim.tv_nsec ||
        st.st_ctim.tv_sec != g_next_args.st_ctim.tv_sec ||
        st.st_ctim.tv_nsec != g_next_args.st_ctim.tv_nsec)
        return 0;
    return !(poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLPRI | POLLERR)));
}

/* The prepared namespace's control socket, its SETUP_DONE taken and GO
 * sent; -1 if there is none that fits or it is gone (killed): the caller
 * sets up the usual way, which also reports any failure.  take_next_ack()
 * then takes the helper's GO_ACK: in between, the shell does the rest of
 * a command line's start while the helper wakes up. */
static int take_next_go(struct shournal_setup_done *done, int *rootfd, int *nsfd, int *syncfd)
{
    char why[SHOURNAL_MAX_FAIL_LEN];
    struct shournal_go m = {SHOURNAL_MSG_GO, 0};
    int sock;

    if (g_next_n == 0)
        return -1;
    if (!next_still_fits()) {
        drop_next();
        return -1;
    }
    sock = g_next_socks[0];
    memmove(g_next_socks, g_next_socks + 1, (size_t)--g_next_n * sizeof g_next_socks[0]);
    if (recv_setup(sock, done, rootfd, nsfd, syncfd, why, sizeof why) == 0) {
        if (send(sock, &m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m)
            return sock;
        close(*rootfd);
        close(*nsfd);
        close(*syncfd);
    }
    close(sock);
    return -1;
}

/* `sock` from take_next_go(), or -1 if the helper did not take GO (idle
 * too long: it left). */
static int take_next_ack(int sock, int rootfd, int nsfd, int syncfd)
{
    struct shournal_go m = {0, 0};

    if (wait_readable(sock, GO_ACK_TIMEOUT_MS) > 0 &&
        recv(sock, &m, sizeof m, MSG_DONTWAIT) == (ssize_t)sizeof m &&
        m.type == SHOURNAL_MSG_GO_ACK)
        return sock;
    close(rootfd);
    close(nsfd);
    close(syncfd);
    close(sock);
    return -1;
}

static char *take_text(void);

/* ------------------------------------------------- the start on disk */

/* A private directory of ours (not a link), made if missing. */
static int private_dir(int dirfd, const char *name)
{
    struct stat st;
    int fd;

    if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
        return -1;
    fd = real_openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Open <data dir>/shournal/spool/<journal key>/starts as shournal.capture.spool does
 * (the data directory as shournal._paths.data_dir: $XDG_DATA_HOME if
 * absolute, else ~/.local/share): the shournal directory may be a link
 * (the Docker edition's shared /journal) but must be ours and writable by
 * nobody else; spool and starts are private directories.  Once per
 * `enable`, and again when the directory was removed meanwhile. */
static void setup_starts(void)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char path[PATH_MAX];
    struct stat st;
    int top, spool, keyed;

    if (g_startsfd >= 0)
        close(g_startsfd);
    g_startsfd = -1;
    shournal_journal_key(g_starts_key);
    if (xdg && xdg[0] == '/')
        snprintf(path, sizeof path, "%.4000s/shournal", xdg);
    else if (home && home[0] == '/')
        snprintf(path, sizeof path, "%.4000s/.local/share/shournal", home);
    else
        return;
    for (char *p = path + 1; *p; p++) { /* mkdir -p; as the listener would */
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            break;
        }
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        goto fail;
    top = real_open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        goto fail;
    if (fstat(top, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 022) != 0) {
        close(top);
        errno = EPERM;
        goto fail;
    }
    spool = private_dir(top, "spool");
    close(top);
    if (spool < 0)
        goto fail;
    keyed = private_dir(spool, g_starts_key);
    close(spool);
    if (keyed < 0)
        goto fail;
    top = private_dir(keyed, SHOURNAL_STARTS_DIR);
    close(keyed);
    if (top < 0)
        goto fail;
    g_startsfd = move_high(top, 1024, 1);
    return;
fail:
    warn_once("command lines are not kept on disk before they run: %.200s/spool: %s", path,
              strerror(errno));
}

/* Field 22 of /proc/<pid>/stat: when the process started (clock ticks
 * since boot), which tells it from a later process with its pid; 0 if
 * unknown. */
static unsigned long long proc_starttime(pid_t pid)
{
    char buf[512], *p = proc_stat_fields(pid, buf, sizeof buf);
    int field;

    for (field = 2; field < 22 && p; field++) /* then p: the space before field+1 */
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* zlib's CRC-32 (the spool's frames) */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
    static uint32_t table[256];
    const unsigned char *b = data;

    if (table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    }
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* "<listener pid>-<session hex>-<start_ns>" (shournal_protocol.h) */
static void start_file_name(char *buf, size_t n)
{
    char sid[2 * sizeof g_session + 1];

    for (size_t i = 0; i < sizeof g_session; i++)
        snprintf(sid + 2 * i, 3, "%02x", g_session[i]);
    snprintf(buf, n, "%d-%s-%lld", (int)g_listener, sid, (long long)g_start_ns);
}

/* The command line's start on disk before the line runs (see
 * shournal_start_file): a recorder killed, or a machine crash, while it
 * runs must not take the line with it.  No fsync: the prompt must not
 * wait for the disk (what a power loss may take: docs/design.md). */
static void write_start_file(const char *text)
{
    struct shournal_start_file sf;
    char cwd[PATH_MAX], name[96], tmp[100];
    uint32_t frame[3];
    size_t cwdlen, textlen = strlen(text), total = 0, done = 0;
    struct iovec iov[4];
    char key[SHOURNAL_KEY_LEN + 1];
    int fd, i;

    shournal_journal_key(key);
    if (strcmp(key, g_starts_key) != 0) /* the line's journal changed */
        setup_starts();
    if (g_startsfd < 0)
        return;
    if (getcwd(cwd, sizeof cwd) == NULL)
        cwd[0] = '\0';
    cwdlen = strlen(cwd);
    if (textlen > SHOURNAL_MAX_COMMAND_TEXT + 1) /* one byte more: cut, marked */
        textlen = SHOURNAL_MAX_COMMAND_TEXT + 1;
    memset(&sf, 0, sizeof sf);
    sf.format = SHOURNAL_START_FORMAT;
    sf.holder_pid = g_holder;
    sf.listener_pid = g_listener;
    sf.cwd_len = (uint32_t)cwdlen;
    sf.holder_starttime = proc_starttime(g_holder);
    sf.listener_starttime = proc_starttime(g_listener);
    sf.start_ns = g_start_ns;
    memcpy(sf.session, g_session, sizeof sf.session);
    memcpy(&frame[0], "SHSP", 4);
    frame[1] = (uint32_t)(sizeof sf + cwdlen + textlen);
    frame[2] = crc32_update(0, &frame[1], 4);
    frame[2] = crc32_update(frame[2], &sf, sizeof sf);
    frame[2] = crc32_update(frame[2], cwd, cwdlen);
    frame[2] = crc32_update(frame[2], text, textlen);
    iov[0] = (struct iovec){frame, sizeof frame};
    iov[1] = (struct iovec){&sf, sizeof sf};
    iov[2] = (struct iovec){cwd, cwdlen};
    iov[3] = (struct iovec){(void *)text, textlen};
    for (i = 0; i < 4; i++)
        total += iov[i].iov_len;
    start_file_name(name, sizeof name);
    snprintf(tmp, sizeof tmp, ".%s", name);
    fd = real_openat(g_startsfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT) { /* the directory was removed: again */
        setup_starts();
        if (g_startsfd < 0)
            return;
        fd = real_openat(g_startsfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0600);
    }
    if (fd < 0)
        goto fail;
    for (i = 0; done < total;) {
        ssize_t w = writev(fd, iov + i, 4 - i);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            close(fd);
            (void)unlinkat(g_startsfd, tmp, 0);
            goto fail;
        }
        done += (size_t)w;
        while (i < 4 && (size_t)w >= iov[i].iov_len) {
            w -= (ssize_t)iov[i].iov_len;
            i++;
        }
        if (i < 4) {
            iov[i].iov_base = (char *)iov[i].iov_base + w;
            iov[i].iov_len -= (size_t)w;
        }
    }
    if (close(fd) != 0 || renameat(g_startsfd, tmp, g_startsfd, name) != 0) {
        int saved = errno;
        (void)unlinkat(g_startsfd, tmp, 0);
        errno = saved;
        goto fail;
    }
    return;
fail:
    warn_once("the start of this command line is not on disk: %s", strerror(errno));
}

/* Is this command line's start on disk?  (Then it is stored from there
 * if its recorder died: see shournal.capture.spool.recover_starts.) */
static int start_file_left(void)
{
    char name[96];

    if (g_startsfd < 0)
        return 0;
    start_file_name(name, sizeof name);
    return faccessat(g_startsfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Is a start of the listener `pid` on disk (a recorder that died before
 * storing its line, which is then stored from its start)? */
static int start_file_of(long pid)
{
    char prefix[24];
    size_t plen;
    struct dirent *e;
    DIR *d;
    int fd, found = 0;

    if (g_startsfd < 0)
        return 0;
    plen = (size_t)snprintf(prefix, sizeof prefix, "%ld-", pid);
    fd = real_openat(g_startsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    while (!found && (e = readdir(d)) != NULL)
        found = strncmp(e->d_name, prefix, plen) == 0;
    closedir(d);
    return found;
}

/* The command line's start (see SHOURNAL_MSG_START): to the holder, which
 * keeps it for the listener, before any of the line's programs runs.  One
 * non-blocking send of the text the hook gave us; nothing is sent without
 * one (a line the user keeps out of history, or no hook for it).  A
 * failure costs only the record of a line whose end never comes. */
static void send_start(const char *text)
{
    struct shournal_command m;
    size_t len = strlen(text);
    struct iovec iov[2];
    struct msghdr mh = {0};

    if (g_syncfd < 0 || text[0] == '\0')
        return;
    write_start_file(text);
    memset(&m, 0, sizeof m);
    m.type = SHOURNAL_MSG_START;
    m.return_value = SHOURNAL_RETURN_VALUE_UNKNOWN;
    m.start_ns = g_start_ns;
    memcpy(m.session, g_session, sizeof m.session);
    iov[0].iov_base = &m;
    iov[0].iov_len = sizeof m;
    iov[1].iov_base = (void *)text;
    iov[1].iov_len = len > SHOURNAL_MAX_START_TEXT ? SHOURNAL_MAX_START_TEXT + 1 : len;
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    (void)sendmsg(g_syncfd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void do_prepare(void)
{
    struct shournal_setup_done done;
    char why[SHOURNAL_MAX_FAIL_LEN], path[PATH_MAX + 32];
    int sock, rootfd, nsfd, syncfd, fd;

    g_prepare_due = 0;
    sock = take_next_go(&done, &rootfd, &nsfd, &syncfd);
    sync_previous_holder();
    throttle_listeners();
    ensure_daemon();
    if (sock >= 0)
        sock = take_next_ack(sock, rootfd, nsfd, syncfd);
    if (sock < 0) {
        sock = start_helper(0, NULL, why, sizeof why);
        if (sock >= 0 && recv_setup(sock, &done, &rootfd, &nsfd, &syncfd, why, sizeof why) != 0) {
            close(sock);
            sock = -1;
        }
        if (sock < 0) {
            warn_once("not recording: %s", why);
            return;
        }
    }
    g_sock = move_high(sock, 1024, 0);
    g_rootfd = move_high(rootfd, g_sock, 1);
    g_nsfd = move_high(nsfd, g_rootfd, 1);
    g_syncfd = move_high(syncfd, g_nsfd, 1);
    g_holder = done.holder_pid;
    g_listener = done.listener_pid;
    g_start_ns = now_ns();
    g_forked = 0;
    g_state = ST_WITHIN;
    g_last_warning[0] = '\0';
    if (g_rundir[0]) {
        marker_path(path, sizeof path, g_listener, SHOURNAL_MARK_RUN);
        fd = real_open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
            close(fd);
    }
    /* zsh's preexec hands the text in before this (text-raw); bash's
     * PS0 sends it from its command substitution ("start") */
    if (g_textfd >= 0) {
        char *text = take_text();
        if (text)
            send_start(text);
        free(text);
    }
}

/* bash resolves the history and variable functions we read in-process
 * (see getrandom()); 0 if it does not export them. */
static int bash_api(void)
{
    if (!bash_history_get) {
        bash_history_get = dlsym(RTLD_DEFAULT, "history_get");
        bash_history_base = dlsym(RTLD_DEFAULT, "history_base");
        bash_history_length = dlsym(RTLD_DEFAULT, "history_length");
        bash_get_string_value = dlsym(RTLD_DEFAULT, "get_string_value");
    }
    return bash_history_get && bash_history_base && bash_history_length &&
           bash_get_string_value;
}

/* Keep bash's own ignorespace off and leave the user's HISTCONTROL as he
 * set it.  bash would not add a space-prefixed line to history, where its
 * text is read, and the previous entry's text would be journaled for it;
 * so bash adds it and the hook drops it from history and journal alike
 * (cleanup's flag s): what the user sees is what he set.  bash parses
 * HISTCONTROL into this flag on each assignment, so this runs at every
 * prompt that drops such lines.  1 if done (this bash exports the flag). */
static int hold_ignorespace(void)
{
    if (!bash_api())
        return 0;
    if (!bash_history_control)
        bash_history_control = dlsym(RTLD_DEFAULT, "history_control");
    if (!bash_history_control)
        return 0;
    *bash_history_control &= ~BASH_HC_IGNSPACE;
    return 1;
}

/* A shell variable of bash is set and neither empty nor "0". */
static int bash_flag(const char *name)
{
    const char *v = bash_get_string_value(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* bash: the text of its newest history entry -- what `history 1` shows --
 * at most `max` bytes; malloc'd, or NULL. */
static char *history_text(size_t max)
{
    struct bash_hist_entry *e;
    char *text;
    size_t n;

    if (!bash_api() || *bash_history_length <= 0)
        return NULL;
    e = bash_history_get(*bash_history_base + *bash_history_length - 1);
    if (e == NULL || e->line == NULL)
        return NULL;
    n = strnlen(e->line, max);
    text = strndup(e->line, n);
    if (text == NULL)
        return NULL;
    while (n > 0 && text[n - 1] == '\n') /* here-documents end in "\n\n" */
        text[--n] = '\0';
    return text;
}

/* bash, fork-free: the line's start from its history entry, which bash
 * added before it expanded PS0 -- what `history 1` in PS0's command
 * substitution (_shournal_start) sends otherwise.  Not when that
 * substitution runs (_SHOURNAL_PS0_FORK: the emulated HISTIGNORE needs
 * it), nor for a space-prefixed line under the emulated ignorespace. */
static void send_start_from_history(void)
{
    char *text;

    if (!bash_api() || bash_flag("_SHOURNAL_PS0_FORK"))
        return;
    text = history_text(SHOURNAL_MAX_START_TEXT + 1);
    if (text != NULL && !(text[0] == ' ' && bash_flag("_SHOURNAL_IGNORESPACE")))
        send_start(text);
    free(text);
}

/* PS0 bumped the exported _SHOURNAL_SEQ: a command line starts.  1 if
 * this call started it. */
static int start_if_new_seq(void)
{
    const char *s;

    if (g_state != ST_IDLE || !is_shell() || g_in_trigger)
        return 0;
    s = getenv("_SHOURNAL_SEQ");
    if (s == NULL || strcmp(s, g_seq) == 0)
        return 0;
    snprintf(g_seq, sizeof g_seq, "%s", s);
    do_prepare();
    return 1;
}

/* ------------------------------------------------------------- cleanup */

/* Show (once) the first line the listener or the daemon left for us:
 * <rundir>/warnings.<our session in hex> concerns our own command lines
 * and is shown first; <rundir>/warnings (nothing to do with one command
 * line) goes to whichever shell takes it first.  Must match _warn() in
 * shournal/capture/listener.py. */
static void show_warnings_file(const char *name)
{
    char path[PATH_MAX + 64], taken[PATH_MAX + 96], buf[1024];
    struct stat held, named;
    ssize_t n;
    int fd;
    if (!g_rundir[0])
        return;
    snprintf(path, sizeof path, "%s/%s", g_rundir, name);
    fd = real_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    /* A writer holds the lock from before its write until after it: busy
     * means a line is being written (shown at the next prompt); the prompt
     * never waits.  Holding it, the file cannot be taken by another shell
     * (they take the lock first), and a writer who opened it before the
     * rename sees afterwards that it was taken and writes a new one. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &held) != 0 ||
        lstat(path, &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
        close(fd);
        return;
    }
    snprintf(taken, sizeof taken, "%s.%d", path, (int)getpid());
    if (rename(path, taken) != 0) {
        close(fd);
        return;
    }
    n = read(fd, buf, sizeof buf - 1);
    if (n > 0) {
        char *nl;
        buf[n] = '\0';
        nl = strchr(buf, '\n');
        if (nl)
            *nl = '\0';
        if (strcmp(buf, g_last_warning) != 0) {
            size_t used = strlen(g_pending);
            snprintf(g_last_warning, sizeof g_last_warning, "%.250s", buf);
            snprintf(g_pending + used, sizeof g_pending - used, "shournal: %.250s\n", buf);
        }
    }
    unlink(taken);
    close(fd);
}

static void show_listener_warnings(void)
{
#define SESSION_WARNINGS SHOURNAL_WARNINGS_FILE "."
    char name[sizeof SESSION_WARNINGS + 2 * sizeof g_session];
    size_t i;
    if (!g_rundir[0])
        return;
    memcpy(name, SESSION_WARNINGS, sizeof SESSION_WARNINGS - 1);
    for (i = 0; i < sizeof g_session; i++)
        snprintf(name + sizeof SESSION_WARNINGS - 1 + 2 * i, 3, "%02x", g_session[i]);
#undef SESSION_WARNINGS
    show_warnings_file(name);
    show_warnings_file(SHOURNAL_WARNINGS_FILE);
}

/* Take the text the hook wrote; returns a malloc'd string or NULL.  At
 * most one byte more than the listener keeps: it marks the cut. */
static char *take_text(void)
{
    char *buf, *p;
    struct stat st;
    size_t want, n = 0;
    if (g_textfd < 0)
        return NULL;
    want = SHOURNAL_MAX_COMMAND_LEN;
    if (fstat(g_textfd, &st) == 0 && st.st_size > 0)
        want = (size_t)st.st_size < (size_t)SHOURNAL_MAX_COMMAND_TEXT + 1
                   ? (size_t)st.st_size
                   : (size_t)SHOURNAL_MAX_COMMAND_TEXT + 1;
    buf = malloc(want + 1);
    if (buf == NULL) {
        close(g_textfd);
        g_textfd = -1;
        return NULL;
    }
    while (n < want) {
        ssize_t r = pread(g_textfd, buf + n, want - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(g_textfd);
    g_textfd = -1;
    buf[n] = '\0';
    p = buf;
    if (g_text_is_history) {
        /* "%5d%c %s\n": number, '*' or ' ' for modified entries, space */
        while (*p == ' ')
            p++;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == '*' || *p == ' ')
            p++;
        if (*p == ' ')
            p++;
        n = strlen(p);
        while (n > 0 && p[n - 1] == '\n') /* here-documents end in "\n\n" */
            p[--n] = '\0';
    }
    memmove(buf, p, strlen(p) + 1);
    return buf;
}

/* A text longer than one message: COMMAND_FD with a memfd holding it.
 * 0 sent, -1 (errno) failed. */
static int send_command_fd(struct shournal_command *m, const char *text, size_t len)
{
    struct iovec iov = {m, sizeof *m};
    size_t done = 0;
    int fd = memfd_create("shournal-command", MFD_CLOEXEC), rc, saved;

    if (fd < 0)
        return -1;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            saved = w < 0 ? errno : EIO;
            close(fd);
            errno = saved;
            return -1;
        }
        done += (size_t)w;
    }
    m->type = SHOURNAL_MSG_COMMAND_FD | (m->type & SHOURNAL_COMMAND_SHELL_ONLY);
    rc = shournal_send_fds(g_sock, &iov, 1, &fd, 1, MSG_DONTWAIT) < 0 ? -1 : 0;
    saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

static void do_cleanup(const char *text, int retval)
{
    char buf[sizeof(struct shournal_command) + SHOURNAL_MAX_COMMAND_LEN];
    char from[PATH_MAX + 32], to[PATH_MAX + 32];
    struct shournal_command m;
    size_t len = text ? strlen(text) : 0;
    int died = 0, rc = 0;
    uint32_t shell_only = g_forked ? 0 : SHOURNAL_COMMAND_SHELL_ONLY;

    memset(&m, 0, sizeof m);
    m.type = SHOURNAL_MSG_COMMAND | shell_only;
    m.return_value = retval;
    m.start_ns = g_start_ns;
    m.end_ns = now_ns();
    memcpy(m.session, g_session, sizeof m.session);
    if (text && len > SHOURNAL_MAX_COMMAND_LEN) {
        rc = send_command_fd(&m, text, len);
        if (rc != 0 && errno != EPIPE && errno != ECONNRESET && errno != ECONNREFUSED) {
            warn_once("command line of %zu bytes stored cut to %d: %s", len,
                      SHOURNAL_MAX_COMMAND_LEN, strerror(errno));
            m.type = SHOURNAL_MSG_COMMAND | shell_only;
            len = SHOURNAL_MAX_COMMAND_LEN;
        }
    }
    if (len <= SHOURNAL_MAX_COMMAND_LEN) {
        memcpy(buf, &m, sizeof m);
        if (text && len)
            memcpy(buf + sizeof m, text, len);
        /* No text (a dropped line, shournal disabled within it): an empty
         * one, so that the listener does not store the line's START. */
        rc = (int)send(g_sock, buf, sizeof m + len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (text && rc < 0 &&
        (errno == EPIPE || errno == ECONNRESET || errno == ECONNREFUSED)) {
        /* with its start on disk, the line is stored from there as
         * incomplete, and whoever does so says so, naming it */
        if (!start_file_left())
            warn_once("the recorder of this command died; it was not recorded");
        died = 1;
    }
    close(g_sock);
    close(g_rootfd);
    close(g_nsfd);
    if (g_prev_sync >= 0)
        close(g_prev_sync);
    g_prev_sync = g_syncfd;
    g_sock = g_rootfd = g_nsfd = g_syncfd = -1;
    g_state = ST_IDLE;
    if (g_rundir[0]) {
        marker_path(from, sizeof from, g_listener, SHOURNAL_MARK_RUN);
        marker_path(to, sizeof to, g_listener, SHOURNAL_MARK_END);
        /* a death already reported here must not be reported again */
        if (died)
            (void)unlink(from);
        else
            (void)rename(from, to);
    }
}

/* ------------------------------------------------------------ triggers */

/* The runtime directory could not be used: say so once per shell (what
 * goes missing and why; `shournal doctor` gives the fix).  The command
 * lines are still recorded (the listener stores them itself). */
static void rundir_unusable(const char *why)
{
    static int told;

    if (told)
        return;
    told = 1;
    warn_once("runtime folder %.200s %.80s: not used, so this shell gets no warnings of "
              "its recorder and no store daemon (see shournal doctor)",
              g_rundir, why);
}

static void setup_rundir(void)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    char why[80];

    g_rundir[0] = '\0';
    if (xdg && xdg[0] == '/') {
        snprintf(g_rundir, sizeof g_rundir, "%.4000s/shournal", xdg);
    } else {
        snprintf(g_rundir, sizeof g_rundir, "/tmp/shournal-%d", (int)getuid());
    }
    why[0] = '\0';
    if (mkdir(g_rundir, 0700) != 0 && errno != EEXIST)
        snprintf(why, sizeof why, "cannot be made (%s)", strerror(errno));
    /* Never follow a directory somebody else planted for us. */
    else if (lstat(g_rundir, &st) != 0)
        snprintf(why, sizeof why, "cannot be examined (%s)", strerror(errno));
    else if (S_ISLNK(st.st_mode))
        snprintf(why, sizeof why, "is a symbolic link");
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, sizeof why, "is not a folder");
    else if (st.st_uid != getuid())
        snprintf(why, sizeof why, "belongs to uid %d, not to you (uid %d)", (int)st.st_uid,
                 (int)getuid());
    else if ((st.st_mode & 077) != 0)
        snprintf(why, sizeof why, "is open to group or others (mode %04o)",
                 (unsigned)(st.st_mode & 07777));
    if (why[0]) {
        rundir_unusable(why);
        g_rundir[0] = '\0';
    }
}

static void do_enable(void)
{
    const char *s;
    int64_t t = now_ns() / 1000000; /* UUIDv7: 48 bit ms timestamp, random rest */

    if (g_state == ST_WITHIN)
        do_cleanup(NULL, 0);
    drop_next(); /* made with the old settings */
    g_shell_pid = getpid();
    if ((s = getenv("SHOURNAL_SUID_PATH")) && s[0] == '/')
        snprintf(g_suid, sizeof g_suid, "%s", s);
    if ((s = getenv("SHOURNAL_LISTENER")) && s[0] == '/')
        snprintf(g_listener_path, sizeof g_listener_path, "%s", s);
    if (getrandom(g_session, sizeof g_session, 0) != (ssize_t)sizeof g_session) {
        for (size_t i = 0; i < sizeof g_session; i++)
            g_session[i] = (uint8_t)(rand() ^ (t >> (i % 8)));
    }
    for (int i = 0; i < 6; i++)
        g_session[i] = (uint8_t)(t >> (40 - 8 * i));
    g_session[6] = (uint8_t)(0x70 | (g_session[6] & 0x0f));
    g_session[8] = (uint8_t)(0x80 | (g_session[8] & 0x3f));
    s = getenv("_SHOURNAL_SEQ");
    snprintf(g_seq, sizeof g_seq, "%s", s ? s : "");
    setup_rundir();
    setup_starts();
    if (g_mounts_fd < 0) {
        int fd = real_open("/proc/self/mounts", O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            g_mounts_fd = move_high(fd, 1024, 1);
    }
    g_last_warning[0] = '\0';
    g_state = ST_IDLE;
}

/* "ok ...\n" and then any warnings, one per line */
static int respond(const char *text)
{
    int fd = memfd_create("shournal-trigger", MFD_CLOEXEC);
    char out[sizeof g_pending + 160];
    size_t len;
    snprintf(out, sizeof out, "%.150s\n%s", text, g_pending);
    g_pending[0] = '\0';
    len = strlen(out);
    if (fd < 0)
        return -1;
    if (write(fd, out, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        errno = EIO;
        return -1;
    }
    return fd;
}

static int handle_trigger_in(const char *action);

static int handle_trigger(const char *action)
{
    int fd;
    g_in_trigger = 1;
    fd = handle_trigger_in(action);
    g_in_trigger = 0;
    return fd;
}

static int handle_trigger_in(const char *action)
{
    char resp[128];

    if (strcmp(action, "status") == 0) {
        static const char *const names[] = {"disabled", "idle", "within"};
        snprintf(resp, sizeof resp, "ok %s", names[g_state]);
        return respond(resp);
    }
    /* bash's PS0 forks its command substitution when the command line
     * has started (see fork()): that child hands in the line's text
     * (text-history, then start), to the line's holder it inherited. */
    if (!is_shell() && g_state == ST_WITHIN &&
        (strcmp(action, "text-history") == 0 || strncmp(action, "start", 5) == 0)) {
        if (action[0] == 's') {
            /* start[/s]: s = drop a space-prefixed line (see cleanup) */
            const char *flags = strchr(action, '/');
            char *text = take_text();
            if (text && !(flags && strchr(flags, 's') && text[0] == ' '))
                send_start(text);
            free(text);
            return respond("ok");
        }
    } else if (strcmp(action, "enable") != 0 && !is_shell()) {
        return respond("err not the shell that enabled shournal");
    }
    if (strcmp(action, "enable") == 0) {
        char sid[32];
        do_enable();
        b64(g_session, sizeof g_session, sid);
        snprintf(resp, sizeof resp, "ok %s", sid);
        prepare_next();
        return respond(resp);
    }
    if (strcmp(action, "disable") == 0) {
        if (g_state == ST_WITHIN)
            do_cleanup(NULL, 0);
        drop_next();
        if (g_prev_sync >= 0) { /* nothing follows to sync for */
            close(g_prev_sync);
            g_prev_sync = -1;
        }
        g_state = ST_DISABLED;
        return respond("ok");
    }
    if (strcmp(action, "histcontrol") == 0) /* see hold_ignorespace() */
        return respond(hold_ignorespace() ? "ok" : "err bash exports no history_control");
    if (strcmp(action, "ps0-fast") == 0) /* see getrandom() */
        return respond(bash_api() ? "ok" : "err bash exports no history API");
    if (strcmp(action, "prepare") == 0) {
        if (g_state == ST_IDLE) {
            do_prepare();
            prepare_if_typed_ahead();
        }
        return respond("ok");
    }
    if (strcmp(action, "text-history") == 0 || strcmp(action, "text-raw") == 0) {
        int fd = memfd_create("shournal-text", MFD_CLOEXEC);
        if (fd < 0)
            return -1;
        if (g_textfd >= 0)
            close(g_textfd);
        g_textfd = fd;
        g_text_is_history = action[5] == 'h';
        return fcntl(fd, F_DUPFD_CLOEXEC, 10);
    }
    if (strncmp(action, "cleanup/", 8) == 0) {
        /* cleanup/<status>[/FLAGS]: s = drop space-prefixed lines (emulated
         * HISTCONTROL=ignorespace / zsh HIST_IGNORE_SPACE); u = the hook
         * could not see the command line's status; h = the text is bash's
         * newest history entry, read here (else the hook wrote it to
         * text-history or text-raw).  A prompt without a command line (an
         * empty line, a hook run twice) drops nothing. */
        char *flags = strchr(action + 8, '/'), *text;
        if (flags && strchr(flags, 's'))
            hold_ignorespace(); /* (HISTCONTROL may have been assigned again) */
        if (flags && strchr(flags, 'h')) {
            free(take_text()); /* (the hook's scratch: see _shournal_histignore_check) */
            text = history_text((size_t)SHOURNAL_MAX_COMMAND_TEXT + 1);
        } else {
            text = take_text();
        }
        int within = g_state == ST_WITHIN;
        int dropped = within && text && flags && strchr(flags, 's') && text[0] == ' ';
        int status = flags && strchr(flags, 'u') ? SHOURNAL_RETURN_VALUE_UNKNOWN
                                                 : atoi(action + 8);
        if (within)
            do_cleanup(dropped ? NULL : (text ? text : ""), status);
        free(text);
        show_listener_warnings();
        g_prepare_due = 1; /* see prepare_if_due() */
        return respond(dropped ? "ok dropped" : "ok");
    }
    errno = ENOENT;
    return -1;
}

/* -------------------------------------------------------------- wrappers */

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

/* Where the shell waits for input: see prepare_if_due().  read() only
 * from a terminal: the prompt's own hook reads our answer with read. */
/* The next namespace is prepared when the shell waits for input (see
 * prepare_if_due), right after the prompt is drawn: where a Ctrl-C lands.
 * The line editors' handlers (readline's, zle's) only note a signal and
 * act on the note when their wait returns EINTR; one handled during the
 * preparation (the helper's spawn takes milliseconds) would leave the wait
 * that follows blocked until the next key -- no new prompt.  So the
 * preparation runs with every signal blocked, and the wait unblocks them
 * atomically (pselect's or ppoll's mask): a signal that came meanwhile
 * interrupts it at once.  0: prepared so, `old` the mask to wait with and
 * to restore afterwards (restore_mask); -1: nothing was due. */
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
