/* A LISTENER for tests/system/test_holder_reopen.py, written as a user would write
 * his own: it logs everything the holder relays on fd 4.
 *
 *   relay_loot OUTDIR [PROGRAM [ARG]...]
 *
 * Runs PROGRAM (in the namespace, as the user) and logs "child RC", touches
 * OUTDIR/ready, waits up to 60 s for OUTDIR/go (the test reads files of its
 * own meanwhile), asks the holder for everything (FLUSH) and writes to
 * OUTDIR/loot, atomically:
 *   record PATH SIZE HASH        a relayed record (HASH 0: none)
 *   fd PATH NOATIME HEXDATA      a relayed descriptor: its path, whether
 *                                O_NOATIME is set on it (0/1), its first bytes
 *   lost N                       the holder's lost-event counts
 * Reading through the descriptor (pread) is what moves the file's atime
 * unless the descriptor has O_NOATIME. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shournal_protocol.h"

static FILE *loot;

static void dump_fd(int fd)
{
    char link[64], path[PATH_MAX];
    unsigned char data[128];
    int fl = fcntl(fd, F_GETFL);
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, path, sizeof path - 1);
    path[l > 0 ? l : 0] = '\0';
    ssize_t d = pread(fd, data, sizeof data, 0);
    fprintf(loot, "fd %s %d ", path, fl >= 0 && (fl & O_NOATIME) ? 1 : 0);
    for (ssize_t i = 0; i < d; i++)
        fprintf(loot, "%02x", data[i]);
    fprintf(loot, "\n");
    close(fd);
}

/* Until the holder answers our FLUSH (or is silent for 5 s). */
static void drain(void)
{
    static char buf[SHOURNAL_MAX_EVENTS_MSG + sizeof(struct shournal_events)]
        __attribute__((aligned(8)));
    struct shournal_flush req = {SHOURNAL_MSG_FLUSH, 1};
    if (send(SHOURNAL_FD_EVENTS, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req) {
        fprintf(loot, "flush-failed %d\n", errno);
        return;
    }
    for (;;) {
        struct pollfd p = {SHOURNAL_FD_EVENTS, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) {
            fprintf(loot, "timeout\n");
            return;
        }
        union {
            char c[CMSG_SPACE(sizeof(int) * SHOURNAL_MAX_FDS_PER_MSG)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = u.c;
        mh.msg_controllen = sizeof u.c;
        ssize_t n = recvmsg(SHOURNAL_FD_EVENTS, &mh, MSG_CMSG_CLOEXEC);
        if (n <= 0) {
            fprintf(loot, "recv %zd %d\n", n, n < 0 ? errno : 0);
            return;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                    dump_fd(((int *)CMSG_DATA(c))[i]);
        struct shournal_events hdr;
        if ((size_t)n < sizeof hdr)
            continue;
        memcpy(&hdr, buf, sizeof hdr);
        fprintf(loot, "lost %u\n", hdr.lost);
        size_t off = sizeof hdr;
        for (uint32_t k = 0; k < hdr.count; k++) {
            struct shournal_record r;
            if (off + sizeof r > (size_t)n)
                break;
            memcpy(&r, buf + off, sizeof r);
            fprintf(loot, "record %.*s %llu %llu\n", (int)r.path_len, buf + off + sizeof r,
                    (unsigned long long)r.size,
                    (r.flags & SHOURNAL_REC_HASH) ? (unsigned long long)r.hash : 0ULL);
            off += sizeof r + ((r.path_len + 7u) & ~7u);
        }
        if (hdr.type == SHOURNAL_MSG_FLUSHED)
            return;
    }
}

int main(int argc, char **argv)
{
    char tmp[PATH_MAX], fin[PATH_MAX], p[PATH_MAX];
    struct timespec ts = {0, 10 * 1000 * 1000};
    if (argc < 2)
        return 2;
    snprintf(tmp, sizeof tmp, "%s/loot.tmp", argv[1]);
    snprintf(fin, sizeof fin, "%s/loot", argv[1]);
    loot = fopen(tmp, "w");
    if (loot == NULL)
        return 1;
    if (argc > 2) {
        int st = 0;
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[2], argv + 2);
            _exit(127);
        }
        waitpid(pid, &st, 0);
        fprintf(loot, "child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    snprintf(p, sizeof p, "%s/ready", argv[1]);
    close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    snprintf(p, sizeof p, "%s/go", argv[1]);
    for (int i = 0; i < 6000 && access(p, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
    drain();
    fclose(loot);
    return rename(tmp, fin) != 0;
}
