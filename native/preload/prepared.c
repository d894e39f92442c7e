/* Namespaces prepared at the prompt for the next command lines. */
#include "preload.h"

#define GO_ACK_TIMEOUT_MS 1000

/* The namespaces prepared at the prompt for the next command lines (see
 * prepare_next), in the order they are taken, and what they were prepared
 * for (all of them at once). */
#define MAX_NEXT 2
static int g_next_socks[MAX_NEXT];
static int g_next_n;
static char g_next_cwd[PATH_MAX];
static struct stat g_next_args;
static char g_next_key[SHOURNAL_KEY_LEN + 1]; /* their journal (see child_env in spawn.c) */
int g_mounts_fd = -1; /* /proc/self/mounts: polls POLLPRI on (u)mounts */

static int next_still_fits(void);

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
void prepare_next(void)
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
void prepare_if_typed_ahead(void)
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
int g_prepare_due;

void prepare_if_due(void)
{
    int saved = errno;

    if (g_prepare_due && is_shell() && !g_in_trigger) {
        g_prepare_due = 0;
        prepare_next();
    }
    errno = saved;
}

void drop_next(void)
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
int take_next_go(struct shournal_setup_done *done, int *rootfd, int *nsfd, int *syncfd)
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
int take_next_ack(int sock, int rootfd, int nsfd, int syncfd)
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
