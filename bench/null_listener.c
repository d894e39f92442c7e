/* The benchmark's floor: a listener that reads every fanotify event and
 * closes its descriptor at once, storing nothing.  The setuid helper execs
 * it (via SHOURNAL_LISTENER) exactly like the real listener, with the
 * control socket on fd 3 (SOCK_SEQPACKET) and the non-blocking fanotify
 * group on fd 4 (see native/shournal_protocol.h).  It exits when fd 3
 * reaches EOF, i.e. when every process of the command has exited.
 *
 * If SHOURNAL_NULL_STATS names a file, "events overflows errors" is
 * written there at exit, so the benchmark can check that the floor saw the
 * same events as the full pipeline.
 *
 * Reading policy: by default the same as shournal/listener.py (drain the
 * queue with reads of 4096*24*4 bytes; when the drain got less than
 * 512*24 bytes, sleep 20 ms before polling again, so that events queue up
 * instead of waking us up one by one).  With SHOURNAL_NULL_EAGER=1 every
 * event is read as soon as poll() reports it: each queued event then wakes
 * the listener, and the command pays for that wake-up.
 *
 * SHOURNAL_NULL_START_DELAY_MS delays the first read (a diagnostic: it
 * imitates a listener that starts slowly, so that one read() returns a
 * large backlog and the kernel must open an fd for every event in it).
 *
 * Built by bench/common.py:  cc -O2 -o null_listener null_listener.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FD_SOCKET 3
#define FD_FANOTIFY 4

static unsigned long long g_events, g_overflows, g_errors;
static char g_buf[4096 * 24 * 4] __attribute__((aligned(8)));

#define SMALL_BATCH_BYTES (512 * 24)
#define BATCH_SLEEP_NS (20 * 1000 * 1000L)

/* Returns the bytes read. */
static size_t drain(void)
{
    size_t total = 0;
    for (;;) {
        ssize_t n = read(FD_FANOTIFY, g_buf, sizeof g_buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return total;
            g_errors++; /* an event we may not open (kernel without FD_ERROR) */
            continue;
        }
        if (n == 0)
            return total;
        total += (size_t)n;
        struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)g_buf;
        while (FAN_EVENT_OK(m, n)) {
            if (m->fd >= 0)
                close(m->fd);
            else if (m->mask & FAN_Q_OVERFLOW)
                g_overflows++;
            else
                g_errors++;
            g_events++;
            m = FAN_EVENT_NEXT(m, n);
        }
    }
}

int main(void)
{
    struct pollfd p[2] = {{FD_FANOTIFY, POLLIN, 0}, {FD_SOCKET, POLLIN, 0}};
    char msg[96 * 1024 + 64];
    const char *stats = getenv("SHOURNAL_NULL_STATS");

    const char *delay = getenv("SHOURNAL_NULL_START_DELAY_MS");
    const char *eager_env = getenv("SHOURNAL_NULL_EAGER");
    int eager = eager_env && eager_env[0] == '1';

    if (chdir("/") != 0) /* never keep a mount busy */
        return 1;
    if (delay && atoi(delay) > 0) {
        struct timespec ts = {atoi(delay) / 1000, (atoi(delay) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        size_t got = drain();
        if (p[1].revents) {
            ssize_t n = recv(FD_SOCKET, msg, sizeof msg, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                break;
            continue;
        }
        if (!eager && got < SMALL_BATCH_BYTES) {
            struct timespec ts = {0, BATCH_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
    /* Closes that raced the socket's release, as the real listener does. */
    for (int i = 0; i < 3; i++) {
        struct pollfd q = {FD_FANOTIFY, POLLIN, 0};
        if (poll(&q, 1, 15) > 0)
            (void)drain();
    }
    if (stats && stats[0]) {
        FILE *f = fopen(stats, "w");
        if (f) {
            fprintf(f, "%llu %llu %llu\n", g_events, g_overflows, g_errors);
            fclose(f);
        }
    }
    return 0;
}
