/* What the shell reads of its settings: the runtime directory, and the
 * helper options the listener derived from the config (setup-args). */
#include "preload.h"

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
int g_args_apparatus;
char g_apparatus_env[] = "SHOURNAL_APPARATUS_SHELL=1";

/* The listener, which reads the config, leaves the helper options derived
 * from it in <rundir>/setup-args (NUL separated); a config change thus
 * takes effect from the next command line on.  Anything unexpected is
 * ignored: the helper validates its argv again anyway. */
int setup_args_from_config(char *buf, char **out, int max)
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

void args_file_state(struct stat *st)
{
    char path[PATH_MAX + 32];

    memset(st, 0, sizeof *st);
    if (g_rundir[0]) {
        setup_args_path(path, sizeof path);
        if (stat(path, st) != 0)
            memset(st, 0, sizeof *st);
    }
}

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

void setup_rundir(void)
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
