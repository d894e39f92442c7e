/* suid_fuzz_run: one bounded invocation of a program (the setuid helper)
 * as an unprivileged user, for tests/system/test_suid_fuzz.py.
 *
 *   suid_fuzz_run USER TIMEOUT_MS FD3 CWD [-m HEX]... [-s HEX]... -- PATH ARGV0 [ARG]...
 *
 * Runs as root and becomes a child subreaper, so every process the
 * invocation leaves behind (the holder, the listener) is reparented here:
 * all of them must be gone by the deadline, or they are killed and
 * reported.  The program runs with USER's ids and groups, in CWD, stdin
 * /dev/null, stdout and stderr on our stderr, no core dumps, and on fd 3:
 *   closed, file, devnull, pipe, stream, dgram (socketpairs), seqpacket,
 *   seqpacket-eof (a socketpair whose other end is already closed),
 *   listen (a listening SEQPACKET socket); "+spare" after any of them puts
 *   a SEQPACKET socket on fd 4 as well (setup --spare), whose other end is
 *   closed at once.
 * With a socketpair, once the program has sent its first message on it (or
 * exited, or closed it), each -m HEX is sent to it as one message (an empty
 * HEX: a zero-length message), each -s HEX to the sync socket that came
 * with SETUP_DONE (if any); then our ends are closed.
 *
 * Report on stdout, one line each:
 *   recv TYPE LEN NFDS           what the program sent on fd 3
 *   child exit N | child signal N          PATH's process
 *   reaped PID exit N | reaped PID signal N  a descendant
 *   hang PID EXE                 still running at the deadline: killed
 * Exit status 0, or 3 if this runner failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_MSGS 64
#define MAX_MSG (256 * 1024)

static void fail(const char *what)
{
    fprintf(stderr, "suid_fuzz_run: %s: %s\n", what, strerror(errno));
    exit(3);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int unhex(const char *s, unsigned char *out, size_t max, size_t *len)
{
    size_t n = strlen(s);
    if (n % 2 || n / 2 > max)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (unsigned char)v;
    }
    *len = n / 2;
    return 0;
}

static void send_hex(int fd, const char *hex)
{
    static unsigned char buf[MAX_MSG];
    size_t len;
    if (fd < 0 || unhex(hex, buf, sizeof buf, &len) != 0)
        return;
    /* the other side may be gone or full: what it does about that is
     * the point, not our error */
    (void)send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void report_status(const char *who, pid_t pid, int st)
{
    if (pid)
        printf("%s %d ", who, (int)pid);
    else
        printf("%s ", who);
    if (WIFSIGNALED(st))
        printf("signal %d\n", WTERMSIG(st));
    else
        printf("exit %d\n", WEXITSTATUS(st));
}

/* Our children now (direct ones and reparented orphans). */
static int children(pid_t *out, int max)
{
    char path[64], buf[4096];
    int n = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    for (char *tok = strtok(buf, " \n"); tok && n < max; tok = strtok(NULL, " \n"))
        out[n++] = (pid_t)atoi(tok);
    return n;
}

static int make_fd3(const char *kind, int *keep)
{
    int sv[2], fd;
    *keep = -1;
    if (strcmp(kind, "closed") == 0)
        return -1;
    if (strcmp(kind, "file") == 0) {
        char tmpl[] = "/tmp/suid-fuzz-fd3-XXXXXX";
        fd = mkostemp(tmpl, O_CLOEXEC);
        if (fd < 0)
            fail("mkostemp");
        unlink(tmpl);
        return fd;
    }
    if (strcmp(kind, "devnull") == 0) {
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
            fail("/dev/null");
        return fd;
    }
    if (strcmp(kind, "pipe") == 0) {
        if (pipe2(sv, O_CLOEXEC) != 0)
            fail("pipe");
        *keep = sv[1];
        return sv[0];
    }
    if (strcmp(kind, "listen") == 0) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        /* autobind to an abstract address, then listen */
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(sa_family_t)) != 0 ||
            listen(fd, 1) != 0)
            fail("listen");
        return fd;
    }
    int type = strcmp(kind, "stream") == 0  ? SOCK_STREAM
               : strcmp(kind, "dgram") == 0 ? SOCK_DGRAM
                                            : SOCK_SEQPACKET;
    if (type == SOCK_SEQPACKET && strcmp(kind, "seqpacket") != 0 &&
        strcmp(kind, "seqpacket-eof") != 0) {
        errno = EINVAL;
        fail(kind);
    }
    if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0)
        fail("socketpair");
    if (strcmp(kind, "seqpacket-eof") == 0)
        close(sv[0]);
    else
        *keep = sv[0];
    return sv[1];
}

int main(int argc, char **argv)
{
    const char *msgs[MAX_MSGS], *syncs[MAX_MSGS];
    int nmsgs = 0, nsyncs = 0, i, fd3, fd4 = -1, peer, sfd, sync = -1, kills = 0;
    long timeout, deadline;
    sigset_t chld;
    struct passwd *pw;
    pid_t child;

    if (argc < 8)
        return 2;
    pw = getpwnam(argv[1]);
    timeout = atol(argv[2]);
    if (pw == NULL || timeout <= 0)
        return 2;
    for (i = 5; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "-m") != 0 && strcmp(argv[i], "-s") != 0))
            return 2;
        if (argv[i][1] == 'm' && nmsgs < MAX_MSGS)
            msgs[nmsgs++] = argv[i + 1];
        else if (argv[i][1] == 's' && nsyncs < MAX_MSGS)
            syncs[nsyncs++] = argv[i + 1];
    }
    if (i + 2 >= argc)
        return 2;
    i++; /* argv[i]: PATH, argv[i + 1]: ARGV0 */

    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        fail("PR_SET_CHILD_SUBREAPER");
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0)
        fail("sigprocmask");
    sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        fail("signalfd");
    {
        char kind[32];
        char *plus;
        snprintf(kind, sizeof kind, "%s", argv[3]);
        plus = strchr(kind, '+');
        if (plus != NULL) {
            int sv[2];
            if (strcmp(plus, "+spare") != 0) {
                errno = EINVAL;
                fail(argv[3]);
            }
            *plus = '\0';
            if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
                fail("socketpair");
            close(sv[0]);
            fd4 = sv[1];
        }
        fd3 = make_fd3(kind, &peer);
    }
    fflush(stdout);
    deadline = now_ms() + timeout;

    child = fork();
    if (child < 0)
        fail("fork");
    if (child == 0) {
        struct rlimit core = {0, 0};
        sigset_t none;
        int null = open("/dev/null", O_RDONLY);
        sigemptyset(&none);
        if (null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0 || setrlimit(RLIMIT_CORE, &core) != 0 ||
            sigprocmask(SIG_SETMASK, &none, NULL) != 0)
            _exit(125);
        if (fd3 >= 0) {
            if (dup2(fd3, 3) != 3)
                _exit(125);
        } else {
            (void)close(3);
        }
        if (fd4 >= 0 && dup2(fd4, 4) != 4)
            _exit(125);
        if (syscall(SYS_close_range, fd4 >= 0 ? 5u : 4u, ~0u, 0u) != 0)
            _exit(125);
        if (initgroups(pw->pw_name, pw->pw_gid) != 0 ||
            setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0 || chdir(argv[4]) != 0)
            _exit(125);
        execv(argv[i], argv + i + 1);
        _exit(126);
    }
    if (fd3 >= 0)
        close(fd3);
    if (fd4 >= 0)
        close(fd4);

    /* Phase 1: the program's first message on fd 3, its exit, or EOF. */
    int child_done = 0;
    if (peer >= 0) {
        for (;;) {
            long left = deadline - now_ms();
            struct pollfd p[2] = {{peer, POLLIN, 0}, {sfd, POLLIN, 0}};
            if (left <= 0)
                break;
            if (poll(p, 2, (int)left) < 0) {
                if (errno == EINTR)
                    continue;
                fail("poll");
            }
            if (p[0].revents) {
                static unsigned char buf[MAX_MSG];
                union {
                    char c[CMSG_SPACE(sizeof(int) * 16)];
                    struct cmsghdr align;
                } u;
                struct iovec iov = {buf, sizeof buf};
                struct msghdr mh = {0};
                int nfds = 0;
                mh.msg_iov = &iov;
                mh.msg_iovlen = 1;
                mh.msg_control = u.c;
                mh.msg_controllen = sizeof u.c;
                ssize_t n = recvmsg(peer, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                if (n < 0)
                    break; /* e.g. a stream socket's peer reset */
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                    int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                    for (int j = 0; j < k; j++) {
                        int fd = ((int *)CMSG_DATA(c))[j];
                        /* SETUP_DONE: root dir, ns/mnt, sync socket */
                        if (j == 2 && sync < 0)
                            sync = fd;
                        else
                            close(fd);
                        nfds++;
                    }
                }
                uint32_t type = 0;
                if (n >= 4)
                    memcpy(&type, buf, 4);
                printf("recv %u %zd %d\n", type, n, nfds);
                break; /* n == 0: EOF */
            }
            if (p[1].revents) {
                /* a child changed state: is it ours and has it ended? */
                int st;
                pid_t w = waitpid(child, &st, WNOHANG);
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof si) == sizeof si)
                    ;
                if (w == child) {
                    report_status("child", 0, st);
                    child_done = 1;
                    break;
                }
            }
        }
        for (int k = 0; k < nmsgs; k++)
            send_hex(peer, msgs[k]);
        for (int k = 0; k < nsyncs; k++)
            send_hex(sync, syncs[k]);
        close(peer);
        if (sync >= 0)
            close(sync);
    }

    /* Phase 2: every descendant must end by the deadline. */
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0) {
            if (w == child)
                report_status("child", 0, st);
            else
                report_status("reaped", w, st);
            child_done |= w == child;
            continue;
        }
        if (w < 0 && errno == ECHILD)
            break;
        if (w < 0 && errno != EINTR)
            fail("waitpid");
        long left = deadline - now_ms();
        if (left <= 0) {
            pid_t pids[256];
            int n = children(pids, 256);
            for (int k = 0; k < n; k++) {
                char link[64], exe[PATH_MAX];
                snprintf(link, sizeof link, "/proc/%d/exe", (int)pids[k]);
                ssize_t l = readlink(link, exe, sizeof exe - 1);
                exe[l > 0 ? l : 0] = '\0';
                printf("hang %d %s\n", (int)pids[k], exe);
                (void)kill(pids[k], SIGKILL); /* our child: the pid is ours */
            }
            /* time for the kills to be reaped (and for orphans of the
             * killed to be reparented here and killed in turn) */
            if (n == 0 || ++kills > 10)
                break;
            deadline = now_ms() + 1000;
            continue;
        }
        struct pollfd p = {sfd, POLLIN, 0};
        if (poll(&p, 1, (int)left) > 0) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si)
                ;
        }
    }
    fflush(stdout);
    return 0;
}
