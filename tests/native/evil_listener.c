/* tests/system/test_suid_security.py: a LISTENER of the user's own, trying to
 * get more out of fd 4 than the relay hands out.
 *   evil OUTDIR ns PROGRAM [ARG]...  run PROGRAM (setuid) in the namespace
 *   evil OUTDIR mark DIR             add an inode mark on DIR, touch OUTDIR/ready,
 *                                    wait for OUTDIR/go
 * then write whatever fd 4 hands out to OUTDIR/loot: "event PATH HEXDATA" for a
 * descriptor, "record PATH HASH" for a relayed record, "raw-fd N" for an open
 * fd the bytes would name were fd 4 the fanotify group itself. */
#define _GNU_SOURCE
#include <sys/fanotify.h>

#include "loot.h"

static void log_fd(int fd)
{
    loot_fd(fd, "event", 0);
}

static void log_record(const struct shournal_record *r, const char *path)
{
    fprintf(loot, "record %.*s %llu\n", (int)r->path_len, path,
            (r->flags & SHOURNAL_REC_HASH) ? (unsigned long long)r->hash : 0ULL);
}

/* Take whatever fd 4 hands out: raw reads as if it were the fanotify group,
 * and SCM_RIGHTS descriptors as the relay protocol sends them. */
static void drain(void)
{
    static char buf[65536] __attribute__((aligned(8)));
    /* ask the holder for everything it has (FLUSH, seq 1) */
    unsigned req[2] = {5, 1};
    fprintf(loot, "flush-send %zd\n", send(4, req, sizeof req, MSG_NOSIGNAL));
    for (int rounds = 0; rounds < 50; rounds++) {
        ssize_t n = loot_recv(buf, sizeof buf, 200, 0, log_fd);
        if (n <= 0)
            return;
        /* as the relay: the records */
        struct shournal_events hdr;
        if ((size_t)n >= sizeof hdr) {
            memcpy(&hdr, buf, sizeof hdr);
            if (hdr.type == SHOURNAL_MSG_EVENTS)
                loot_records(buf, (size_t)n, &hdr, log_record);
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
    if (argc < 4)
        return 2;
    if (loot_open(argv[1]) != 0)
        return 1;
    if (strcmp(argv[2], "mark") == 0) {
        int rc = fanotify_mark(4, FAN_MARK_ADD, FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE |
                               FAN_EVENT_ON_CHILD, AT_FDCWD, argv[3]);
        fprintf(loot, "mark %d %d\n", rc, rc ? errno : 0);
        fflush(loot);
        loot_touch(argv[1], "ready");
        loot_wait_for(argv[1], "go", 3000);
    } else {
        loot_run(argv + 3);
    }
    drain();
    return loot_close();
}
