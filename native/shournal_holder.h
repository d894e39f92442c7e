/* The holder: the unprivileged process `shournal-suid setup` forks.  It
 * pins the namespace, is the only owner of the fanotify group, and relays
 * to the listener the records of the files the user may read (see the
 * rules at the top of shournal_suid.c).  What setup hands it is below;
 * the code is in shournal_holder.c, linked into shournal-suid. */
#ifndef SHOURNAL_HOLDER_H
#define SHOURNAL_HOLDER_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

#include "shournal_protocol.h"

/* What the holder does with each event (setup options). */
struct holder_opts {
    int reads_need_write; /* --writable-reads */
    int discard;          /* --discard-events (bench-helper builds only): the floor */
    int hash_on;          /* not --no-hash */
    uint32_t chunk, reads;
    int archive_on; /* reads of script candidates carry their fd (not --no-archive) */
    uint64_t archive_max;
    int next; /* --archive-ext and --archive-name entries together */
    const char *ext[SHOURNAL_MAX_ARCHIVE_EXT];
    unsigned char is_name[SHOURNAL_MAX_ARCHIVE_EXT]; /* a whole basename (Makefile) */
};

/* SCHED_OTHER or SCHED_BATCH for ourselves: both ways need no privilege,
 * and a failure only costs latency. */
static inline void set_policy(int policy)
{
    struct sched_param sp = {0};
    (void)sched_setscheduler(0, policy, &sp);
}


/* Called in the child right after setup's fork, still with setup's ids:
 * takes the holder's ids (real uid, shournal gid, the user's groups),
 * writes one byte to `ready_wr` once /proc/<pid> shows them, and relays
 * the fanotify group `fan` to the listener on `sock` until it is done
 * (`listener`: its pid, whose own file events are skipped).  `sync`: the
 * shell's barrier before its next command line; `pressure`: written once
 * when the queue passes QUEUE_PRESSURE. */
void run_holder(int fan, int sock, int sync, int ready_wr, int pressure, gid_t grp,
                pid_t listener, const struct holder_opts *o) __attribute__((noreturn));

#endif
