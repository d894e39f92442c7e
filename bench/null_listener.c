/* The benchmark's floor: a listener that receives every relayed event and
 * closes its descriptor at once, storing nothing.  The setuid helper execs
 * it (via SHOURNAL_LISTENER) exactly like the real listener, with the
 * control socket on fd 3 and the holder's event relay on fd 4 (both
 * SOCK_SEQPACKET, see native/shournal_protocol.h).  It exits when fd 3
 * reaches EOF, i.e. when every process of the command has exited, after
 * the same flushes as shournal/capture/listener.py.
 *
 * This floor ("relay floor") includes everything but Python: the
 * kernel's fanotify work and the holder's (permission check, fstat, path,
 * partial hash, sending records).  With SHOURNAL_BENCH_FLOOR=1, `shournal
 * run` also makes the holder discard every event right after reading it
 * (--discard-events): the kernel's price alone ("floor").
 *
 * If SHOURNAL_NULL_STATS names a file, "events lost truncated" is written
 * there at exit, so the benchmark can check that the floor saw the same
 * events as the full pipeline.
 *
 * Built by bench/common.py:  cc -O2 -I native -o null_listener null_listener.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shournal_protocol.h"

static unsigned long long g_events, g_lost, g_truncated;
static uint32_t g_flushed;

/* Handle every waiting message; returns -1 when the holder is gone. */
static int pump(int flags)
{
    for (;;) {
        static char data[sizeof(struct shournal_events) + SHOURNAL_MAX_EVENTS_MSG];
        union {
            char buf[CMSG_SPACE(sizeof(int) * SHOURNAL_MAX_FDS_PER_MSG)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {data, sizeof data};
        struct msghdr mh = {0};
        struct shournal_events hdr;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        ssize_t n = recvmsg(SHOURNAL_FD_EVENTS, &mh, flags | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -1;
        }
        if (n == 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *fds = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < k; i++)
                close(fds[i]);
        }
        if ((size_t)n < sizeof hdr)
            continue;
        memcpy(&hdr, data, sizeof hdr);
        g_lost += hdr.lost;
        if (mh.msg_flags & MSG_CTRUNC)
            g_truncated++;
        if (hdr.type == SHOURNAL_MSG_EVENTS)
            g_events += hdr.count;
        else if (hdr.type == SHOURNAL_MSG_FLUSHED)
            g_flushed = hdr.seq;
        flags = MSG_DONTWAIT;
    }
}

static void flush(uint32_t seq)
{
    struct shournal_flush req = {SHOURNAL_MSG_FLUSH, seq};
    if (send(SHOURNAL_FD_EVENTS, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req)
        return;
    while (g_flushed != seq)
        if (pump(0) < 0)
            return;
}

int main(void)
{
    struct pollfd p[2] = {{SHOURNAL_FD_EVENTS, POLLIN, 0}, {SHOURNAL_FD_SOCKET, POLLIN, 0}};
    char msg[SHOURNAL_MAX_COMMAND_LEN + 64];
    const char *stats = getenv("SHOURNAL_NULL_STATS");

    if (chdir("/") != 0) /* never keep a mount busy */
        return 1;
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (p[0].revents && pump(MSG_DONTWAIT) < 0)
            p[0].fd = -1;
        if (p[1].revents) {
            ssize_t n = recv(SHOURNAL_FD_SOCKET, msg, sizeof msg, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                break;
        }
    }
    /* As the real listener: flush, then twice more after 10 ms for closes
     * that raced the socket's release. */
    flush(1);
    for (uint32_t i = 2; i <= 3; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000L};
        nanosleep(&ts, NULL);
        flush(i);
    }
    if (stats && stats[0]) {
        FILE *f = fopen(stats, "w");
        if (f) {
            fprintf(f, "%llu %llu %llu\n", g_events, g_lost, g_truncated);
            fclose(f);
        }
    }
    return 0;
}
