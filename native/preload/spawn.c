/* Starting a program of ours from the shell, detached: the setuid helper
 * that sets up a command line's namespace (and the daemon's starter, see
 * daemon.c), with the environment that decides the line's journal. */
#include "preload.h"

#define SETUP_TIMEOUT_MS 5000
/* An idle shell gives its prepared namespace (one fanotify group of the
 * user's fs.fanotify.max_user_groups) back after this long. */
#define PREPARED_IDLE_S "600"

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
int spawn_detached(const char *path, char *const argv[], char *const envp[], int sock,
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

char **child_env(char *first)
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
 * a spare namespace on it (see prepare_next in prepared.c): the caller
 * closes it. */
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

int recv_setup(int sock, struct shournal_setup_done *done, int *rootfd, int *nsfd,
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
int start_helper(int prepared, int *spare, char *why, size_t whylen)
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
