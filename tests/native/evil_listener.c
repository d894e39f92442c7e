/* tests/system/test_suid_security.py: a LISTENER of the user's own, trying to
 * get more out of fd 4 than the relay hands out. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "shournal_protocol.h"
/* A LISTENER written by the user instead of shournal's:
 *   evil OUTDIR ns PROGRAM [ARG]...  run PROGRAM (setuid) in the namespace
 *   evil OUTDIR mark DIR             add an inode mark on DIR, touch OUTDIR/ready,
 *                                    wait for OUTDIR/go
 * then write whatever fd 4 hands out to OUTDIR/loot: "event PATH HEXDATA" for a
 * descriptor, "record PATH HASH" for a relayed record. */
static FILE *loot;
/* Take whatever fd 4 hands out: raw reads as if it were the fanotify group,
 * and SCM_RIGHTS descriptors as the relay protocol sends them. */
static void dump_fd(int fd)
{
    char link[64], path[PATH_MAX];
    unsigned char data[128];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, path, sizeof path - 1);
    path[l > 0 ? l : 0] = '\0';
    ssize_t d = pread(fd, data, sizeof data, 0);
    fprintf(loot, "event %s ", path);
    for (ssize_t i = 0; i < d; i++)
        fprintf(loot, "%02x", data[i]);
    fprintf(loot, "\n");
    close(fd);
}
static void drain(void)
{
    static char buf[65536] __attribute__((aligned(8)));
    /* ask the holder for everything it has (FLUSH, seq 1) */
    unsigned req[2] = {5, 1};
    fprintf(loot, "flush-send %zd\n", send(4, req, sizeof req, MSG_NOSIGNAL));
    for (int rounds = 0; rounds < 50; rounds++) {
        struct pollfd p = {4, POLLIN, 0};
        if (poll(&p, 1, 200) != 1 || !(p.revents & POLLIN))
            return;
        union {
            char c[CMSG_SPACE(sizeof(int) * 253)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = u.c;
        mh.msg_controllen = sizeof u.c;
        ssize_t n = recvmsg(4, &mh, 0);
        if (n <= 0) {
            fprintf(loot, "recv %zd %d\n", n, n < 0 ? errno : 0);
            return;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                    dump_fd(((int *)CMSG_DATA(c))[i]);
        /* as the relay: the records */
        struct shournal_events hdr;
        if ((size_t)n >= sizeof hdr) {
            memcpy(&hdr, buf, sizeof hdr);
            size_t off = sizeof hdr;
            for (uint32_t k = 0; hdr.type == SHOURNAL_MSG_EVENTS && k < hdr.count; k++) {
                struct shournal_record r;
                if (off + sizeof r > (size_t)n)
                    break;
                memcpy(&r, buf + off, sizeof r);
                fprintf(loot, "record %.*s %llu\n", (int)r.path_len, buf + off + sizeof r,
                        (r.flags & SHOURNAL_REC_HASH) ? (unsigned long long)r.hash : 0ULL);
                off += sizeof r + ((r.path_len + 7u) & ~7u);
            }
        }
        /* were it a fanotify group, the bytes would be events */
        struct fanotify_event_metadata *m = (void *)buf;
        for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n))
            if (m->vers == FANOTIFY_METADATA_VERSION && m->fd >= 0 && m->fd < 65536 &&
                fcntl(m->fd, F_GETFD) >= 0)
                fprintf(loot, "raw-fd %d\n", m->fd);
    }
}
int main(int argc, char **argv)
{
    char tmp[PATH_MAX], fin[PATH_MAX], p[PATH_MAX];
    if (argc < 4)
        return 2;
    snprintf(tmp, sizeof tmp, "%s/loot.tmp", argv[1]);
    snprintf(fin, sizeof fin, "%s/loot", argv[1]);
    loot = fopen(tmp, "w");
    if (loot == NULL)
        return 1;
    if (strcmp(argv[2], "mark") == 0) {
        int rc = fanotify_mark(4, FAN_MARK_ADD, FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE |
                               FAN_EVENT_ON_CHILD, AT_FDCWD, argv[3]);
        fprintf(loot, "mark %d %d\n", rc, rc ? errno : 0);
        fflush(loot);
        snprintf(p, sizeof p, "%s/ready", argv[1]);
        close(open(p, O_WRONLY | O_CREAT, 0644));
        snprintf(p, sizeof p, "%s/go", argv[1]);
        struct timespec ts = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 3000 && access(p, F_OK) != 0; i++)
            nanosleep(&ts, NULL);
    } else {
        int st = 0;
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[3], argv + 3);
            _exit(127);
        }
        waitpid(pid, &st, 0);
        fprintf(loot, "child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    drain();
    fclose(loot);
    return rename(tmp, fin) != 0;
}
