/* The holder of shournal-suid (see shournal_holder.h): reads the fanotify
 * group, keeps only what the user may read and reach, takes stat, path and
 * partial hash right away, and relays the records to the listener,
 * queueing what the socket cannot take yet.  It runs with the user's ids
 * and the shournal group, never privileged; the fanotify group it owns is
 * the reason it is trusted code all the same (rules: shournal_suid.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shournal_fdpass.h"
#include "shournal_hash.h"
#include "shournal_holder.h"
#include "shournal_protocol.h"

/* A message the socket could not take yet (the listener is not running
 * yet, or lags): header, records and fds, in sending order. */
struct queued {
    struct queued *next;
    size_t len;    /* of data */
    size_t charge; /* what it counts against QUEUE_PRESSURE/QUEUE_MAX */
    uint32_t nfds;
    int *fds; /* after the data */
    uint8_t data[] __attribute__((aligned(8))); /* struct shournal_events + records */
};

/* The listener (Python) is started lazily (--lazy-listener): at the end of
 * the command line, or once this much waits in the holder's queue.  24 MiB
 * is ~230,000 records of typical paths (~108 bytes each): a copy of a
 * kernel source tree (157,000 events) runs to its end without a Python
 * start-up next to it, whose disk reads cost a cold-cache copy several
 * points (bench/README.md).  Past QUEUE_MAX the holder blocks on
 * the socket again and the kernel's queue (with its overflow count) takes
 * the slack, as without a queue; the 24 MiB between the two are the
 * listener's time to start. */
_Static_assert(sizeof(struct shournal_events) % 8 == 0, "queued fds follow the data aligned");
#define QUEUE_PRESSURE (24u << 20)
#define QUEUE_MAX (48u << 20)

struct relay {
    int fan, sock, procfd;
    int pressure; /* write end: wakes the waiting listener; -1 once used */
    pid_t listener;
    pid_t self; /* our own closes of relayed fds make events too */
    const struct holder_opts *o;
    uint32_t count, nfds, forwarded;
    uint32_t lost_overflow, lost_unreadable, lost_path; /* by reason: see
                                                         struct shournal_events */
    uint32_t ignored, ignore_max; /* inode ignore marks tried, allowed */
    size_t used, qbytes;
    struct queued *qhead, **qtail;
    uint8_t *hashbuf;
    int fds[SHOURNAL_MAX_FDS_PER_MSG];
    uint8_t msg[SHOURNAL_MAX_EVENTS_MSG] __attribute__((aligned(8)));
    /* what the shell sends on the sync socket: one byte, or START */
    uint8_t from_shell[sizeof(struct shournal_command) + SHOURNAL_MAX_START_TEXT + 1]
        __attribute__((aligned(8)));
};
_Static_assert(sizeof(struct shournal_command) + SHOURNAL_MAX_START_TEXT + 1 + 7 <=
                   SHOURNAL_MAX_EVENTS_MSG,
               "a START fits one relay message");

static void relay_sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The socket is full (the listener is not running yet, or lags): retry
 * later.  ETOOMANYREFS: too many fds of this user in flight. */
static int send_would_block(int err)
{
    return err == EAGAIN || err == EINTR || err == ENOBUFS || err == ETOOMANYREFS;
}

/* Send one message and close its fds (they are the listener's now).  With
 * `block`, wait for room; without, 1 means "the socket is full".  -1: the
 * listener is gone. */
static int send_message(int sock, const struct iovec *iov, int iovlen, const int *fds,
                        uint32_t nfds, int block)
{
    while (shournal_send_fds(sock, iov, (size_t)iovlen, fds, nfds, MSG_DONTWAIT) < 0) {
        if (!send_would_block(errno))
            return -1;
        if (!block)
            return 1;
        relay_sleep_ms(1);
    }
    for (uint32_t i = 0; i < nfds; i++)
        (void)close(fds[i]);
    return 0;
}

/* Send queued messages in order: all of them if `block`, else as many as
 * the socket takes now.  -1: the listener is gone. */
static int queue_pump(struct relay *r, int block)
{
    while (r->qhead) {
        struct queued *q = r->qhead;
        struct iovec iov = {q->data, q->len};
        int rc = send_message(r->sock, &iov, 1, q->fds, q->nfds, block);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
        r->qbytes -= q->charge;
        r->qhead = q->next;
        if (r->qhead == NULL)
            r->qtail = &r->qhead;
        free(q);
    }
    return 0;
}

/* Send the pending records.  What the socket cannot take now waits in our
 * queue (up to QUEUE_MAX), so neither a listener that starts late nor one
 * that lags makes us stop reading the fanotify group. */
static int relay_send(struct relay *r, uint32_t type, uint32_t seq)
{
    struct shournal_events hdr = {type,
                                  r->count,
                                  r->lost_overflow + r->lost_unreadable + r->lost_path,
                                  seq,
                                  r->forwarded,
                                  r->nfds,
                                  r->o->hash_on ? r->o->chunk : 0,
                                  r->o->hash_on ? r->o->reads : 0,
                                  r->lost_overflow,
                                  r->lost_unreadable,
                                  r->lost_path,
                                  0};
    struct iovec iov[2] = {{&hdr, sizeof hdr}, {r->msg, r->used}};
    size_t len = sizeof hdr + r->used; /* a multiple of 8: the fds follow aligned */
    size_t charge = sizeof(struct queued) + len + sizeof(int) * r->nfds;
    struct queued *q;

    int iovlen = r->used ? 2 : 1, rc;

    if (r->qhead && queue_pump(r, 0) != 0)
        return -1;
    if (r->qhead == NULL) {
        rc = send_message(r->sock, iov, iovlen, r->fds, r->nfds, 0);
        if (rc < 0)
            return -1;
        if (rc == 0)
            goto sent;
    }
    if (r->qbytes + charge > QUEUE_MAX && queue_pump(r, 1) != 0)
        return -1;
    q = malloc(charge);
    if (q == NULL) {
        /* no memory for the queue: wait for the socket instead */
        if (queue_pump(r, 1) != 0 || send_message(r->sock, iov, iovlen, r->fds, r->nfds, 1) != 0)
            return -1;
        goto sent;
    }
    q->next = NULL;
    q->len = len;
    q->charge = charge;
    q->nfds = r->nfds;
    q->fds = (int *)(void *)(q->data + len);
    memcpy(q->data, &hdr, sizeof hdr);
    memcpy(q->data + sizeof hdr, r->msg, r->used);
    memcpy(q->fds, r->fds, sizeof(int) * r->nfds);
    *r->qtail = q;
    r->qtail = &q->next;
    r->qbytes += charge;
    if (r->qbytes >= QUEUE_PRESSURE && r->pressure >= 0) {
        char c = 1;
        if (write(r->pressure, &c, 1) != 1) {
            /* non-blocking; a listener already running closed its end */
        }
        (void)close(r->pressure);
        r->pressure = -1;
    }
sent:
    r->count = r->nfds = 0;
    r->lost_overflow = r->lost_unreadable = r->lost_path = 0;
    r->used = 0;
    return 0;
}

/* The shell's START (`len` bytes in r->from_shell, checked by the caller):
 * relayed unchanged after the records read so far, padded to a multiple of
 * 8 like records.  -1: the listener is gone. */
static int relay_start(struct relay *r, size_t len)
{
    size_t padded = (len + 7) & ~(size_t)7;

    if (r->used && relay_send(r, SHOURNAL_MSG_EVENTS, 0) != 0)
        return -1;
    memcpy(r->msg, r->from_shell, len);
    memset(r->msg + len, 0, padded - len);
    r->used = padded;
    return relay_send(r, SHOURNAL_MSG_START, 0);
}

/* May the user read (write) what fd refers to?  faccessat2 checks with our
 * fs ids and groups, which are the user's (see run_holder); ACLs, LSMs and
 * read-only mounts count.  1 yes, 0 no, -1 the check itself failed. */
static int user_may_access(int fd, int mode)
{
    if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) == 0)
        return 1;
    return errno == EACCES || errno == EPERM || errno == EROFS || errno == ETXTBSY ? 0 : -1;
}

/* faccessat2 on the event's fd checks the inode only: a file readable by
 * all in a directory only root may search (0700) would leak to a setuid
 * program's, a sudo rule's or root's read of it (/proc/<pid>/root/...)
 * in the namespace.  So the user's own walk of the event's path (our fs
 * ids and groups: every directory's search permission) must lead to the
 * same inode.  statx opens nothing: no side effects on FIFOs or devices,
 * no file to close, and no fanotify event of our own (an open for reading,
 * which would check read permission too, makes a FAN_CLOSE_NOWRITE for
 * every event it checks); DONT_SYNC, as dev and ino need no round trip on
 * network file systems.  One syscall per relayed event, ~3 us of the
 * holder's CPU here (bench/README.md, helper_ab.py).
 * 1 yes, 0 no (permission denied: dropped like any file the user may not
 * read, uncounted, so it tells him nothing), -1 the path no longer leads
 * there (renamed, replaced or unlinked since, a mount on top): the user
 * might have seen it, so the caller counts it as lost. */
static int user_reaches(const char *path, const struct stat *st)
{
    struct statx sx;
    if (path[0] != '/')
        return -1; /* "pipe:[...]" and the like: no path to walk */
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
              STATX_INO, &sx) != 0)
        return errno == EACCES || errno == EPERM ? 0 : -1;
    return sx.stx_ino == (uint64_t)st->st_ino &&
                   makedev(sx.stx_dev_major, sx.stx_dev_minor) == st->st_dev
               ? 1
               : -1;
}

/* A file deleted since it was read has no path to walk.  The kernel names
 * it "<path> (deleted)"; it was in that directory, so the user must be
 * able to reach the directory and search it, as he would have had to to
 * open the file there.  Strips the suffix (*plen shrinks).  1 yes, 0 no,
 * -1 the check failed or the name is not such a one. */
static int user_reached_deleted(char *path, ssize_t *plen)
{
    static const char suffix[] = " (deleted)";
    const size_t sl = sizeof suffix - 1;
    char *slash;
    int rc;

    if (path[0] != '/' || (size_t)*plen <= sl + 1 ||
        memcmp(path + *plen - sl, suffix, sl) != 0)
        return -1;
    *plen -= (ssize_t)sl;
    path[*plen] = '\0';
    slash = strrchr(path, '/');
    if (slash == path)
        return syscall(SYS_faccessat2, AT_FDCWD, "/", X_OK, AT_EACCESS) == 0 ? 1 : 0;
    *slash = '\0';
    rc = (int)syscall(SYS_faccessat2, AT_FDCWD, path, X_OK, AT_EACCESS);
    *slash = '/';
    if (rc == 0)
        return 1;
    /* gone with its directory, or never his to see: nothing was his */
    return errno == EACCES || errno == EPERM || errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

/* The fd that travels with a script candidate: opened by us, as the user,
 * by the path just checked (the event's fd has O_NOATIME, which the kernel
 * grants its owner only, and no permission check behind it).  Regular
 * files only (archive_candidate), non-blocking against a lease.  Returns
 * the fd, -1 with the verdict of user_reaches in *ok. */
static int user_open(const char *path, const struct stat *st, int *ok)
{
    struct stat fs;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        *ok = errno == EACCES || errno == EPERM ? 0 : -1;
        return -1;
    }
    if (fstat(fd, &fs) != 0 || fs.st_ino != st->st_ino || fs.st_dev != st->st_dev) {
        (void)close(fd);
        *ok = -1;
        return -1;
    }
    return fd;
}

/* With --writable-reads, a read of a file the user may not write is
 * dropped; a build reads each system header hundreds of times (make -j2 of
 * elfutils: ~250,000 such reads).  After the first, an ignore mark on the
 * file's inode for FAN_CLOSE_NOWRITE makes the kernel skip the rest: no
 * event, no fd opened for us, no faccessat2 (bench/README.md).
 * Only for "permission denied" (a property of the inode: a read-only mount
 * of a file that is writable elsewhere stays observed).  The group and its
 * marks end with the command line; a modification of the file clears the
 * mark (no FAN_MARK_IGNORED_SURV_MODIFY).
 *
 * Each mark pins an inode and counts against the user's
 * fs.fanotify.max_user_marks, which every other command line of his needs
 * for its mount marks.  That limit is 1% of RAM's worth of inode marks:
 * 8,192 with 1 GB or less (205,039 with 24 GB).  One build must not take
 * it all, so a command line takes at most 1/32 of it and never more than
 * 4,096 (the elfutils build takes ~530), and stops at the first ENOSPC. */
#define IGNORE_MARKS_MAX 4096u
#define MAX_USER_MARKS "/proc/sys/fs/fanotify/max_user_marks"

static uint32_t ignore_marks_budget(void)
{
    char buf[32];
    ssize_t n;
    unsigned long limit;
    char *end;
    int fd = open(MAX_USER_MARKS, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    (void)close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    errno = 0;
    limit = strtoul(buf, &end, 10);
    if (errno != 0 || end == buf || (*end != '\n' && *end != '\0'))
        return 0;
    limit /= 32;
    return limit < IGNORE_MARKS_MAX ? (uint32_t)limit : IGNORE_MARKS_MAX;
}

static void ignore_reads_of(struct relay *r, int fd)
{
    if (r->ignored >= r->ignore_max)
        return;
    r->ignored++;
    if (fanotify_mark(r->fan, FAN_MARK_ADD | FAN_MARK_IGNORED_MASK, FAN_CLOSE_NOWRITE, fd,
                      NULL) != 0 &&
        errno == ENOSPC)
        r->ignored = r->ignore_max; /* the user's mark limit: stop trying */
}

/* A read of a script the listener may archive: its fd travels along, so
 * the content is the one the command read even if the file goes away.
 * Only a pre-filter (size, extension or basename); the listener applies
 * the rest. */
static int archive_candidate(const struct holder_opts *o, uint64_t mask, const struct stat *st,
                             const char *path, size_t plen)
{
    if (!o->archive_on || !(mask & FAN_CLOSE_NOWRITE) || !S_ISREG(st->st_mode) ||
        (uint64_t)st->st_size > o->archive_max)
        return 0;
    if (o->next == 0)
        return 1;
    for (int i = 0; i < o->next; i++) {
        size_t el = strlen(o->ext[i]);
        char before = o->is_name[i] ? '/' : '.';
        if (plen > el + 1 && path[plen - el - 1] == before &&
            memcmp(path + plen - el, o->ext[i], el) == 0)
            return 1;
    }
    return 0;
}

/* One event: permission checks, then fstat, path and partial hash, taken
 * now (the next command line may change the file soon).  Consumes m->fd.
 * The hash is read through m->fd (the same inode as checked; O_NOATIME and
 * no fanotify event of our own); only the fd of a script candidate is
 * opened again, by user_open. */
static int relay_take(struct relay *r, const struct fanotify_event_metadata *m)
{
    const struct holder_opts *o = r->o;
    struct shournal_record rec;
    struct stat st;
    char path[PATH_MAX], name[16];
    ssize_t plen;
    size_t need;
    int ok, deleted, fdkeep = 0, fd = -1;

    if (m->pid == r->listener || m->pid == r->self || o->discard)
        goto drop;
    ok = user_may_access(m->fd, R_OK);
    if (ok == 1 && o->reads_need_write && !(m->mask & FAN_CLOSE_WRITE)) {
        ok = user_may_access(m->fd, W_OK);
        if (ok == 0 && (errno == EACCES || errno == EPERM))
            ignore_reads_of(r, m->fd);
    }
    if (ok < 0)
        goto unreadable;
    if (ok == 0)
        goto drop;
    if (fstat(m->fd, &st) != 0)
        goto unreadable;
    deleted = st.st_nlink == 0;
    /* A written file deleted since is a temporary one: nothing will ever
     * be found by it.  A read one is the version a command replaced
     * (`sed -i f`, `sort -o f f`): the input of its lineage. */
    if (deleted && (m->mask & FAN_CLOSE_WRITE))
        goto drop;
    snprintf(name, sizeof name, "%d", m->fd);
    plen = readlinkat(r->procfd, name, path, sizeof path);
    if (plen <= 0 || (size_t)plen >= sizeof path)
        goto unreadable;
    path[plen] = '\0';
    ok = deleted ? user_reached_deleted(path, &plen) : user_reaches(path, &st);
    if (ok < 0)
        goto path_gone;
    if (ok == 0)
        goto drop;
    memset(&rec, 0, sizeof rec);
    rec.mask = m->mask;
    rec.size = (uint64_t)st.st_size;
    rec.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    rec.mode = st.st_mode;
    rec.uid = st.st_uid;
    rec.gid = st.st_gid;
    rec.pid = m->pid;
    rec.path_len = (uint16_t)plen;
    if (o->hash_on && st.st_size > 0) {
        int h = shournal_partial_hash(m->fd, (uint64_t)st.st_size, o->chunk, o->reads, r->hashbuf,
                                      &rec.hash);
        if (h < 0)
            goto unreadable;
        if (h > 0)
            rec.flags |= SHOURNAL_REC_HASH;
    }
    /* a deleted file has no path to open it by as the user */
    fdkeep = !deleted && archive_candidate(o, m->mask, &st, path, (size_t)plen);
    if (fdkeep) {
        fd = user_open(path, &st, &ok);
        if (fd < 0 && ok < 0)
            goto path_gone;
        if (fd < 0)
            goto drop;
        rec.flags |= SHOURNAL_REC_FD;
    }
    need = sizeof rec + (((size_t)plen + 7) & ~(size_t)7);
    if ((r->used + need > sizeof r->msg || (fdkeep && r->nfds == SHOURNAL_MAX_FDS_PER_MSG)) &&
        relay_send(r, SHOURNAL_MSG_EVENTS, 0) != 0) {
        (void)close(m->fd);
        if (fd >= 0)
            (void)close(fd);
        return -1;
    }
    memcpy(r->msg + r->used, &rec, sizeof rec);
    memcpy(r->msg + r->used + sizeof rec, path, (size_t)plen);
    memset(r->msg + r->used + sizeof rec + plen, 0, need - sizeof rec - (size_t)plen);
    r->used += need;
    r->count++;
    r->forwarded++;
    if (fdkeep)
        r->fds[r->nfds++] = fd;
    (void)close(m->fd);
    return 0;
unreadable:
    r->lost_unreadable++;
    goto drop;
path_gone:
    r->lost_path++;
drop:
    (void)close(m->fd);
    return 0;
}

/* Read everything queued and forward what the user may see; returns the
 * number of events read, -1 if the listener is gone. */
static long relay_drain(struct relay *r)
{
    char buf[sizeof(struct fanotify_event_metadata) * 256] __attribute__((aligned(8)));
    long total = 0;

    for (;;) {
        ssize_t len = read(r->fan, buf, sizeof buf);
        if (len < 0) {
            if (errno == EAGAIN)
                break;
            if (errno == EINTR)
                continue;
            /* without FAN_REPORT_FD_ERROR, an event whose fd could not be
             * opened fails the read and is gone */
            r->lost_overflow++;
            if (++total > 1000000)
                break;
            continue;
        }
        if (len == 0)
            break;
        struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
        for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
            total++;
            if (m->vers != FANOTIFY_METADATA_VERSION) {
                if (m->fd >= 0)
                    (void)close(m->fd);
                r->lost_unreadable++;
                continue;
            }
            if (m->fd < 0) { /* FAN_NOFD: overflow; else -errno (FD_ERROR) */
                r->lost_overflow++;
                continue;
            }
            if (relay_take(r, m) != 0)
                return -1;
        }
    }
    if ((r->count || r->lost_overflow || r->lost_unreadable || r->lost_path) &&
        relay_send(r, SHOURNAL_MSG_EVENTS, 0) != 0)
        return -1;
    return total;
}

/* Keep the user's supplementary groups and take his gid as the fs gid, so
 * access checks are his; uid, euid and saved uid become his; gid, egid
 * and saved gid become shournal: ptrace needs matching gids, and
 * /proc/<pid> shows euid/egid, the trampoline's credential. */
static int holder_ids(gid_t grp)
{
    uid_t ruid = getuid(), r, e, s;
    gid_t rgid = getgid(), rg, eg, sg;

    if (setresgid(grp, grp, grp) != 0)
        return -1;
    (void)setfsgid(rgid); /* returns the old value, never an error */
    if (setresuid(ruid, ruid, ruid) != 0)
        return -1;
    if (getresuid(&r, &e, &s) != 0 || r != ruid || e != ruid || s != ruid)
        return -1;
    if (getresgid(&rg, &eg, &sg) != 0 || rg != grp || eg != grp || sg != grp)
        return -1;
    if ((gid_t)setfsgid((gid_t)-1) != rgid) /* -1 is invalid: a pure query */
        return -1;
    if (prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) != 0)
        return -1;
    if (ruid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
        return -1;
    return 0;
}

/* The holder pins the namespace (its ids -- real uid, shournal gid -- are
 * the trampoline's credential: no user can create such a process) and is
 * the only owner of the fanotify group. */
void run_holder(int fan, int sock, int sync, int ready_wr, int pressure, gid_t grp,
                pid_t listener, const struct holder_opts *o)
{
    struct relay *r = calloc(1, sizeof *r);
    struct rlimit rl;
    char c = 1;
    int batching = 0;

    if (r == NULL || holder_ids(grp) != 0)
        _exit(1);
    /* With fs.suid_dumpable=1 the change of ids made us dumpable as the
     * user: a core (where core_pattern says) and /proc files of his.  The
     * trampoline needs neither: /proc/<pid> shows our ids regardless. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        _exit(1);
    r->hashbuf = malloc(o->chunk);
    /* our own fds, for their paths: relative lookups are cheaper */
    r->procfd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->hashbuf == NULL || r->procfd < 0)
        _exit(1);
    /* one read may open 256 fds, and script candidates wait for their
     * message: make room */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* Reading the fanotify group keeps up with the command as an ordinary
     * task, even when forked by a prepared set-up (SCHED_BATCH). */
    set_policy(SCHED_OTHER);
    /* A prepared namespace may wait long at a prompt: pin no directory
     * (a busy copy of a mount makes its umount fail); paths we read come
     * from /proc/self/fd. */
    if (chdir("/") != 0)
        _exit(1);
    /* Only now does /proc/<pid> show our credential: the trampoline must
     * not be pointed at us before. */
    if (write(ready_wr, &c, 1) != 1)
        _exit(1);
    (void)close(ready_wr);

    r->fan = fan;
    r->sock = sock;
    r->pressure = pressure;
    r->qtail = &r->qhead;
    r->listener = listener;
    r->self = getpid();
    r->o = o;
    r->ignore_max = o->reads_need_write ? ignore_marks_budget() : 0;
    for (;;) {
        /* While batching, the fanotify group waits; the listener and the
         * shell never do. */
        struct pollfd p[3] = {{sock, (short)(POLLIN | (r->qhead ? POLLOUT : 0)), 0},
                              {sync, POLLIN, 0},
                              {fan, POLLIN, 0}};
        int np = batching ? 2 : 3, rc = poll(p, (nfds_t)np, batching ? 20 : -1);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        batching = 0;
        if ((p[0].revents & POLLOUT) && queue_pump(r, 0) != 0)
            _exit(0); /* the listener is gone */
        if (p[1].revents) {
            /* One byte: the shell is about to start its next command line.
             * START: this command line has started.  Longer messages are
             * cut by recv (SOCK_SEQPACKET) and fail the length check.
             * Before a FLUSH: a START the shell sent before the line
             * ended must reach the listener before FLUSHED. */
            ssize_t n = recv(sync, r->from_shell, sizeof r->from_shell, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                (void)close(sync); /* the shell is done with us: fine */
                sync = -1;
                continue;
            }
            if (n == 1) {
                c = (char)r->from_shell[0];
                if (relay_drain(r) < 0)
                    _exit(0);
                (void)send(sync, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            } else if (n >= (ssize_t)sizeof(struct shournal_command) &&
                       ((struct shournal_command *)(void *)r->from_shell)->type ==
                           SHOURNAL_MSG_START) {
                if (relay_start(r, (size_t)n) != 0)
                    _exit(0);
            }
            continue;
        }
        if (p[0].revents & ~POLLOUT) {
            struct shournal_flush req;
            ssize_t n = recv(sock, &req, sizeof req, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                _exit(0); /* the listener is done (or gone) */
            if (n == (ssize_t)sizeof req && req.type == SHOURNAL_MSG_FLUSH) {
                if (relay_drain(r) < 0 || relay_send(r, SHOURNAL_MSG_FLUSHED, req.seq) != 0)
                    _exit(0);
            }
            continue;
        }
        if (np == 3 && (p[2].revents & POLLIN)) {
            long n = relay_drain(r);
            if (n < 0)
                _exit(0);
            /* Like the original: after a small batch let events queue up
             * instead of waking up for each one. */
            batching = n < 512;
        } else if (np == 3 && p[2].revents) {
            _exit(1);
        }
    }
}
