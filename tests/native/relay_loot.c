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
#include "loot.h"

static void log_fd(int fd)
{
    loot_fd(fd, "fd", 1);
}

static void log_record(const struct shournal_record *r, const char *path)
{
    fprintf(loot, "record %.*s %llu %llu\n", (int)r->path_len, path,
            (unsigned long long)r->size,
            (r->flags & SHOURNAL_REC_HASH) ? (unsigned long long)r->hash : 0ULL);
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
        ssize_t n = loot_recv(buf, sizeof buf, 5000, MSG_CMSG_CLOEXEC, log_fd);
        if (n == 0)
            fprintf(loot, "timeout\n");
        if (n <= 0)
            return;
        struct shournal_events hdr;
        if ((size_t)n < sizeof hdr)
            continue;
        memcpy(&hdr, buf, sizeof hdr);
        fprintf(loot, "lost %u\n", hdr.lost);
        loot_records(buf, (size_t)n, &hdr, log_record);
        if (hdr.type == SHOURNAL_MSG_FLUSHED)
            return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (loot_open(argv[1]) != 0)
        return 1;
    if (argc > 2)
        loot_run(argv + 2);
    loot_touch(argv[1], "ready");
    loot_wait_for(argv[1], "go", 6000);
    drain();
    return loot_close();
}
