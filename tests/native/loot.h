/* What the test LISTENERs (evil_listener.c, relay_loot.c) share: the loot
 * file they log to (written to OUTDIR/loot.tmp, renamed to OUTDIR/loot when
 * complete), the program they run in the namespace, the ready/go handshake
 * with the test, and receiving what the holder relays on fd 4.  Only names
 * of the relay protocol every tested helper version has (the controls build
 * relay_loot.c against an older native/shournal_protocol.h). */
#ifndef SHOURNAL_TEST_LOOT_H
#define SHOURNAL_TEST_LOOT_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shournal_protocol.h"

static FILE *loot;
static char loot_tmp[PATH_MAX], loot_final[PATH_MAX];

/* Open OUTDIR/loot.tmp: 0, or -1. */
static inline int loot_open(const char *outdir)
{
    snprintf(loot_tmp, sizeof loot_tmp, "%s/loot.tmp", outdir);
    snprintf(loot_final, sizeof loot_final, "%s/loot", outdir);
    loot = fopen(loot_tmp, "w");
    return loot == NULL ? -1 : 0;
}

/* Publish the loot: 0, or 1 when it could not be renamed. */
static inline int loot_close(void)
{
    fclose(loot);
    return rename(loot_tmp, loot_final) != 0;
}

/* Run argv[0] with argv to its end; log "child RC" (128+N: signal N). */
static inline void loot_run(char **argv)
{
    int st = 0;
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    fprintf(loot, "child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Create OUTDIR/NAME (the test waits for it). */
static inline void loot_touch(const char *outdir, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", outdir, name);
    close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
}

/* Wait for OUTDIR/NAME, at most TRIES times 10 ms. */
static inline void loot_wait_for(const char *outdir, const char *name, int tries)
{
    char p[PATH_MAX];
    struct timespec ts = {0, 10 * 1000 * 1000};
    snprintf(p, sizeof p, "%s/%s", outdir, name);
    for (int i = 0; i < tries && access(p, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
}

/* Log "TAG PATH [NOATIME] HEXDATA" for a descriptor handed out (its path,
 * with SHOW_NOATIME whether O_NOATIME is set on it (0/1), its first bytes:
 * reading them through the fd is what moves the file's atime unless the fd
 * has O_NOATIME), then close it. */
static inline void loot_fd(int fd, const char *tag, int show_noatime)
{
    char link[64], path[PATH_MAX];
    unsigned char data[128];
    int fl = fcntl(fd, F_GETFL);
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, path, sizeof path - 1);
    path[l > 0 ? l : 0] = '\0';
    ssize_t d = pread(fd, data, sizeof data, 0);
    fprintf(loot, "%s %s ", tag, path);
    if (show_noatime)
        fprintf(loot, "%d ", fl >= 0 && (fl & O_NOATIME) ? 1 : 0);
    for (ssize_t i = 0; i < d; i++)
        fprintf(loot, "%02x", data[i]);
    fprintf(loot, "\n");
    close(fd);
}

/* Wait up to TIMEOUT_MS for a message on SHOURNAL_FD_EVENTS and receive it
 * into BUF (recvmsg FLAGS), each descriptor attached (SCM_RIGHTS) to ON_FD.
 * Its length; 0 on timeout; -1 when the socket failed or was closed (logged
 * as "recv N ERRNO"). */
static inline ssize_t loot_recv(char *buf, size_t len, int timeout_ms, int flags,
                                void (*on_fd)(int))
{
    struct pollfd p = {SHOURNAL_FD_EVENTS, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1 || !(p.revents & POLLIN))
        return 0;
    union {
        char c[CMSG_SPACE(sizeof(int) * SHOURNAL_MAX_FDS_PER_MSG)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, len};
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.c;
    mh.msg_controllen = sizeof u.c;
    ssize_t n = recvmsg(SHOURNAL_FD_EVENTS, &mh, flags);
    if (n <= 0) {
        fprintf(loot, "recv %zd %d\n", n, n < 0 ? errno : 0);
        return -1;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                on_fd(((int *)CMSG_DATA(c))[i]);
    return n;
}

/* The records of a relay message of N bytes whose header is HDR, each to
 * ON_RECORD with its path (PATH_LEN bytes, not NUL-terminated); stops at
 * a record that does not fit. */
static inline void loot_records(const char *buf, size_t n, const struct shournal_events *hdr,
                                void (*on_record)(const struct shournal_record *, const char *))
{
    size_t off = sizeof *hdr;
    for (uint32_t k = 0; k < hdr->count; k++) {
        struct shournal_record r;
        if (off + sizeof r > n)
            break;
        memcpy(&r, buf + off, sizeof r);
        if (off + sizeof r + r.path_len > n)
            break;
        on_record(&r, buf + off + sizeof r);
        off += sizeof r + ((r.path_len + 7u) & ~7u);
    }
}

#endif
