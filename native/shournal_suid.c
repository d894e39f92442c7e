/* shournal-suid: the only privileged program of shournal.
 *
 * Installed setuid root.  It does exactly three things that need privilege
 * and nothing else:
 *
 *   setup  - unshare a mount namespace, create a fanotify group and mark the
 *            namespace's copies of the mounts, fork a "holder" process that
 *            pins the namespace and relays to the listener records (stat,
 *            path, partial hash) of the files the user may read, then drop
 *            privileges for good and exec the user's listener with the
 *            relay socket.
 *   exec   - the exec trampoline: join a namespace made by `setup` for the
 *            same real user, drop privileges for good, exec the program.
 *   check  - report whether the above can work on this machine (doctor).
 *
 * Rules (each has an attacking test in tests/system/test_suid_security.py or
 * tests/system/test_suid_hardening.py):
 *   - libc only, strict argv, the environment is never consulted while
 *     privileged, nothing big on the stack (the user sets RLIMIT_STACK);
 *   - a namespace is joined only if its holder's /proc entry is owned by the
 *     real uid and the shournal group, which no user is a member of, so only
 *     this program can have created it, and only if the namespace belongs to
 *     our own user namespace (in one of the user's, his files may be
 *     bind-mounted over system files: setuid programs would run as root on
 *     them);
 *   - setresgid/setresuid to the real ids, verified, before anything of the
 *     user's runs;
 *   - a joined program keeps the caller's root directory (a chroot stays
 *     a jail: setns() alone would reset it), verified by dev and inode,
 *     or nothing runs (tests/system/test_chroot.py);
 *   - the fanotify group never reaches user code: made with CAP_SYS_ADMIN,
 *     its event fds are opened without permission checks and it could mark
 *     anything.  The holder keeps it and relays an event only if the user
 *     may read the file (faccessat2 with the user's ids and groups) and
 *     reach it by its path (his own path walk leads to the same inode;
 *     tests/system/test_holder_reopen.py);
 *     an fd it relays is one it opened itself, as the user;
 *   - namespaces and fanotify groups (setup's and check's) are counted
 *     against the user, not root, so a user can exhaust only his own
 *     limits; our forks count against his RLIMIT_NPROC (no CAP_SYS_ADMIN or
 *     CAP_SYS_RESOURCE in the effective set while forking), and check's
 *     probe child dies with check;
 *   - members of the shournal group are refused (they could forge holders),
 *     by the group database as well as by the process's groups: a member
 *     whose session lacks the group gets it with sg;
 *   - never dumpable while privileged (fs.suid_dumpable=1 would write
 *     root's core into the caller's directory);
 *   - every descriptor not handed on is closed.
 *
 * The holder's code is in shournal_holder.c (the same binary).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <mntent.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shournal_fdpass.h"
#include "shournal_forward.h"
#include "shournal_holder.h"
#include "shournal_protocol.h"

#ifndef SHOURNAL_GROUP
#define SHOURNAL_GROUP "shournal"
#endif
#ifndef SHOURNAL_VERSION
#error "SHOURNAL_VERSION is set by native/Makefile (from shournal/__init__.py)"
#endif
#ifndef FAN_REPORT_FD_ERROR
#define FAN_REPORT_FD_ERROR 0x00002000 /* Linux 6.13, backported to 6.6.66 */
#endif

#ifndef SECBIT_NO_SETUID_FIXUP
#define SECBIT_NO_SETUID_FIXUP (1 << 2) /* <linux/securebits.h> */
#endif

#define MAX_PREPARED_IDLE_S 86400
#define EXIT_USAGE 2

extern char **environ;

static const char *g_prog = "shournal-suid";
static int g_sock = -1; /* setup: report failures to the shell here */
static mode_t g_umask = 022; /* the caller's, restored on every drop */

static void die_setup(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void msg(const char *fmt, va_list ap)
{
    char buf[SHOURNAL_MAX_FAIL_LEN];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    dprintf(STDERR_FILENO, "%s: %.*s\n", g_prog, n, buf);
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    msg(fmt, ap);
    va_end(ap);
}

/* In setup the shell waits for one message; a failure must reach it as
 * SETUP_FAIL so the shell prints one line and runs the command unobserved. */
static void die_setup(const char *fmt, ...)
{
    char buf[sizeof(struct shournal_setup_fail) + SHOURNAL_MAX_FAIL_LEN];
    struct shournal_setup_fail hdr = {SHOURNAL_MSG_SETUP_FAIL, 0};
    va_list ap;
    int n;

    memcpy(buf, &hdr, sizeof hdr);
    va_start(ap, fmt);
    n = vsnprintf(buf + sizeof hdr, SHOURNAL_MAX_FAIL_LEN, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n >= SHOURNAL_MAX_FAIL_LEN)
        n = SHOURNAL_MAX_FAIL_LEN - 1;
    if (g_sock >= 0)
        (void)send(g_sock, buf, sizeof hdr + (size_t)n, MSG_NOSIGNAL);
    dprintf(STDERR_FILENO, "%s: %.*s\n", g_prog, n, buf + sizeof hdr);
    _exit(1);
}

static int parse_pid(const char *s, pid_t *out)
{
    char *end;
    long v;
    if (s == NULL || *s < '1' || *s > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v <= 0 || v > INT32_MAX)
        return -1;
    *out = (pid_t)v;
    return 0;
}

static int parse_count(const char *s, long max, long *out)
{
    char *end;
    long v;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* CHUNK:READS, the partial hash settings (config: [hash]) */
static int parse_hash(const char *s, uint32_t *chunk, uint32_t *reads)
{
    char buf[32], *colon;
    long c, r;
    if (strnlen(s, sizeof buf) >= sizeof buf)
        return -1;
    memcpy(buf, s, strlen(s) + 1);
    colon = strchr(buf, ':');
    if (colon == NULL)
        return -1;
    *colon = '\0';
    if (parse_count(buf, SHOURNAL_HASH_CHUNK_MAX, &c) != 0 || c < SHOURNAL_HASH_CHUNK_MIN ||
        parse_count(colon + 1, SHOURNAL_HASH_READS_MAX, &r) != 0 || r < SHOURNAL_HASH_READS_MIN)
        return -1;
    *chunk = (uint32_t)c;
    *reads = (uint32_t)r;
    return 0;
}

static int shournal_gid(gid_t *out)
{
    struct group grp, *res = NULL;
    char buf[4096];
    int rc = getgrnam_r(SHOURNAL_GROUP, &grp, buf, sizeof buf, &res);
    if (rc != 0 || res == NULL)
        return -1;
    *out = grp.gr_gid;
    return 0;
}

/* Permanent drop to the real ids; returns -1 unless verified. */
static int drop_privileges(void)
{
    uid_t ruid = getuid(), r, e, s;
    gid_t rgid = getgid(), rg, eg, sg;

    if (setresgid(rgid, rgid, rgid) != 0)
        return -1;
    if (setresuid(ruid, ruid, ruid) != 0)
        return -1;
    if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0)
        return -1;
    /* the checks below fail without a call failing: say so in errno
     * (the expected failure of setuid(0) sets it too) */
    if (r != ruid || e != ruid || s != ruid || rg != rgid || eg != rgid || sg != rgid ||
        (ruid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) ||
        /* with securebits left set, the uid change above would keep caps */
        prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) != 0) {
        errno = EPERM;
        return -1;
    }
    umask(g_umask);
    return 0;
}

#define MAX_DB_BUF (1u << 20) /* for one passwd or group entry */

/* A getpw*_r / getgr*_r buffer that was too small (ERANGE): double it. */
static int grow_buf(char **buf, size_t *len)
{
    char *p;
    if (*len >= MAX_DB_BUF)
        return -1;
    p = realloc(*buf, *len * 2);
    if (p == NULL)
        return -1;
    *buf = p;
    *len *= 2;
    return 0;
}

/* Is grp in a group list (getgroups, getgrouplist)?  Such lists are
 * allocated: their length is the user's business (up to 65536). */
static int list_has(const gid_t *list, int n, gid_t grp)
{
    for (int i = 0; i < n; i++)
        if (list[i] == grp)
            return 1;
    return 0;
}

/* The groups of `name` (primary `gid`) in the group database. */
static int db_groups(const char *name, gid_t gid, gid_t **list, int *n)
{
    int want = 64;
    for (;;) {
        gid_t *p = realloc(*list, sizeof **list * (size_t)want);
        int have = want;
        if (p == NULL)
            return -1;
        *list = p;
        if (getgrouplist(name, gid, *list, &want) >= 0) {
            *n = want;
            return 0;
        }
        if (want <= have || want > 65536)
            return -1;
    }
}

/* Is the real user a member of the shournal group?  Such a user could
 * make a process with our credential himself (sg, newgrp), whether this
 * process has the group or not (a session started before he was added
 * lacks it), so the group database decides as well: his primary group and
 * the group's member list, by uid (another name may share his uid) -- what
 * sg and newgrp go by -- and, with `all_sources`, getgrouplist (what a new
 * login gives him, from every NSS source: nested LDAP groups, ...).
 * getgrouplist asks every source, so with nss-systemd each call loads that
 * module (~0.4 ms of CPU here): setup (once per command line) and check
 * ask it; exec (once per program) does not, as the namespaces it joins
 * were made by a setup that did, and a holder forged by a member whom only
 * getgrouplist names is still refused unless its namespace belongs to our
 * user namespace, where he could not have mounted anything.
 * 1 member, 0 not, -1 cannot tell (refused all the same). */
static int user_in_group(gid_t grp, int all_sources)
{
    uid_t ruid = getuid();
    struct passwd pw, *pwr = NULL;
    struct group gr, *grr = NULL;
    size_t len = 4096, mlen = 4096;
    char *buf = malloc(len), *mbuf = malloc(mlen);
    gid_t *list = NULL;
    int n, e, rc = -1;

    if (buf == NULL || mbuf == NULL)
        goto out;
    if (getgid() == grp || getegid() == grp) {
        rc = 1;
        goto out;
    }
    n = getgroups(0, NULL);
    if (n < 0 || (list = calloc((size_t)n + 1, sizeof *list)) == NULL ||
        (n = getgroups(n, list)) < 0)
        goto out;
    if (list_has(list, n, grp)) {
        rc = 1;
        goto out;
    }
    while ((e = getpwuid_r(ruid, &pw, buf, len, &pwr)) == ERANGE)
        if (grow_buf(&buf, &len) != 0)
            goto out;
    if (e != 0)
        goto out;
    if (pwr != NULL && pw.pw_gid == grp) {
        rc = 1;
        goto out;
    }
    if (pwr != NULL && all_sources) {
        if (db_groups(pw.pw_name, pw.pw_gid, &list, &n) != 0)
            goto out;
        if (list_has(list, n, grp)) {
            rc = 1;
            goto out;
        }
    }
    while ((e = getgrgid_r(grp, &gr, buf, len, &grr)) == ERANGE)
        if (grow_buf(&buf, &len) != 0)
            goto out;
    if (e != 0 || grr == NULL)
        goto out;
    for (char **m = gr.gr_mem; *m != NULL; m++) {
        struct passwd mpw, *mpwr = NULL;
        while ((e = getpwnam_r(*m, &mpw, mbuf, mlen, &mpwr)) == ERANGE)
            if (grow_buf(&mbuf, &mlen) != 0)
                goto out;
        if (e != 0)
            goto out;
        if (mpwr != NULL && mpw.pw_uid == ruid) {
            rc = 1;
            goto out;
        }
    }
    rc = 0;
out:
    free(list);
    free(mbuf);
    free(buf);
    return rc;
}

/* "refusing: ..." for user_in_group's answer (1 or -1) */
static const char *member_refusal(int member)
{
    return member > 0 ? "refusing: you are a member of group '" SHOURNAL_GROUP
                        "' (remove that membership)"
                      : "refusing: cannot read the group database for group '" SHOURNAL_GROUP "'";
}

/* fork(), counted against the user's RLIMIT_NPROC like any fork of his:
 * CAP_SYS_ADMIN or CAP_SYS_RESOURCE in the effective set would exempt it.
 * Both leave the effective set for the fork and come back in the parent;
 * the child keeps the rest (CAP_SETUID, CAP_SETGID) for its own drop --
 * or, with `child_keeps_caps` (--spare: it sets up a namespace of its
 * own), gets them back as the parent does. */
static pid_t fork_counted(int child_keeps_caps)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct saved[_LINUX_CAPABILITY_U32S_3], cut[_LINUX_CAPABILITY_U32S_3];
    const int ia = CAP_TO_INDEX(CAP_SYS_ADMIN), ir = CAP_TO_INDEX(CAP_SYS_RESOURCE);
    const uint32_t ma = CAP_TO_MASK(CAP_SYS_ADMIN), mr = CAP_TO_MASK(CAP_SYS_RESOURCE);
    pid_t pid;
    int err;

    if (syscall(SYS_capget, &hdr, saved) != 0)
        return -1;
    memcpy(cut, saved, sizeof cut);
    cut[ia].effective &= ~ma;
    cut[ir].effective &= ~mr;
    if (syscall(SYS_capset, &hdr, cut) != 0 || syscall(SYS_capget, &hdr, cut) != 0)
        return -1;
    if ((cut[ia].effective & ma) || (cut[ir].effective & mr)) {
        errno = EPERM;
        return -1;
    }
    pid = fork();
    if (pid == 0 && !child_keeps_caps)
        return 0;
    err = errno;
    if (syscall(SYS_capset, &hdr, saved) != 0) {
        if (pid == 0)
            _exit(1); /* the parent sees our end: our socket's EOF */
        err = errno;
        if (pid > 0) {
            (void)kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        pid = -1;
    }
    errno = err;
    return pid;
}

/* Does the mount namespace `nsfd` belong to the user namespace we run in?
 * A setuid-root program is privileged only in a user namespace that maps
 * root, which only root can make, and only a process privileged in that
 * one can make a mount namespace belonging to it; any other (a user's own
 * user namespace, where he may bind-mount his files over system files)
 * is never joined.  1 yes, 0 no, -1 cannot tell. */
static int ns_in_our_userns(int nsfd)
{
    struct stat theirs, ours;
    int ufd = ioctl(nsfd, NS_GET_USERNS), rc;

    if (ufd < 0)
        return errno == EPERM ? 0 : -1; /* EPERM: not even below ours */
    rc = fstat(ufd, &theirs);
    (void)close(ufd);
    if (rc != 0 || stat("/proc/self/ns/user", &ours) != 0)
        return -1;
    return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

/* close_range(2) exists since 5.9; fall back to a bounded loop. */
static void close_from(int lowfd)
{
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0u) == 0)
        return;
    for (int fd = lowfd; fd < 65536; fd++)
        (void)close(fd);
}

/* Place `from` at `to` without CLOEXEC. */
static int move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0);
    if (dup2(from, to) < 0)
        return -1;
    (void)close(from);
    return 0;
}

static int path_is_under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    while (n > 1 && prefix[n - 1] == '/')
        n--;
    if (n == 1 && prefix[0] == '/')
        return 1;
    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Pseudo file systems nobody wants in a provenance journal, and where a
 * mount mark can only cost time. */
static int fstype_ignored(const char *type)
{
    static const char *const ignored[] = {
        "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs",
        "tracefs", "securityfs", "pstore", "bpf", "autofs", "fusectl",
        "configfs", "binfmt_misc", "hugetlbfs", "efivarfs", "nsfs", "rpc_pipefs",
        NULL};
    for (size_t i = 0; ignored[i]; i++)
        if (strcmp(type, ignored[i]) == 0)
            return 1;
    return 0;
}

static int mount_ignored(const char *dir, char *const *excludes, int nexcl)
{
    static const char *const builtin[] = {"/proc", "/sys", "/run", "/dev/hugepages",
                                          "/dev/mqueue", "/dev/pts", NULL};
    for (size_t i = 0; builtin[i]; i++)
        if (path_is_under(dir, builtin[i]))
            return 1;
    for (int i = 0; i < nexcl; i++)
        if (path_is_under(dir, excludes[i]))
            return 1;
    return 0;
}

/* Mark every mount of the (new) namespace; returns how many were marked.
 * The mount holding our root is marked through "/" itself: in a chroot
 * whose root is not a mount point (schroot, a package build root) no line
 * of /proc/self/mounts names it.  *root_marked: 1 if that worked (or the
 * user excluded "/"); if not, errno on return is that mark's. */
static int mark_mounts(int fan, uint64_t mask, char *const *excludes, int nexcl, int *root_marked)
{
    FILE *f;
    struct mntent ent;
    char buf[8192];
    int count = 0, root_err = 0;

    *root_marked = 1;
    if (!mount_ignored("/", excludes, nexcl) &&
        fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_MOUNT, mask, AT_FDCWD, "/") != 0) {
        root_err = errno;
        *root_marked = 0;
    }
    f = setmntent("/proc/self/mounts", "re");
    if (f == NULL)
        return -1;
    while (getmntent_r(f, &ent, buf, sizeof buf) != NULL) {
        if (ent.mnt_dir[0] != '/' || fstype_ignored(ent.mnt_type) ||
            mount_ignored(ent.mnt_dir, excludes, nexcl))
            continue;
        if (fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_MOUNT, mask, AT_FDCWD, ent.mnt_dir) != 0)
            continue; /* vanished or inaccessible mount: not fatal */
        count++;
    }
    endmntent(f);
    errno = root_err;
    return count;
}

static int fanotify_group(uint32_t *flags_out)
{
    const unsigned base = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK;
    const unsigned evflags = O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NOATIME;
    int fan = fanotify_init(base | FAN_REPORT_FD_ERROR, evflags);
    *flags_out = 0;
    if (fan >= 0) {
        *flags_out |= SHOURNAL_SETUP_FD_ERROR;
        return fan;
    }
    if (errno != EINVAL)
        return -1;
    return fanotify_init(base, evflags); /* kernel without FD_ERROR */
}

static int send_setup_done(int sock, pid_t holder, uint32_t flags, int rootfd, int nsfd,
                           int syncfd)
{
    int fds[3] = {rootfd, nsfd, syncfd};
    struct shournal_setup_done m = {SHOURNAL_MSG_SETUP_DONE, (int32_t)holder,
                                    (int32_t)getpid(), flags};
    struct iovec iov = {&m, sizeof m};

    return shournal_send_fds(sock, &iov, 1, fds, 3, 0) == (ssize_t)sizeof m ? 0 : -1;
}

static int check_socket(int fd)
{
    struct stat st;
    int type = 0;
    socklen_t len = sizeof type;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return -1;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET)
        return -1;
    return 0;
}

#ifdef SHOURNAL_BENCH_FLOOR
#define DISCARD_USAGE " [--discard-events]"
#else
#define DISCARD_USAGE ""
#endif

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
    dprintf(STDERR_FILENO,
            "usage: %s setup [--no-read] [--writable-reads] [--exclude-mount DIR]...\n"
            "         [--hash CHUNK:READS | --no-hash] [--no-archive | --archive-max-size BYTES\n"
            "         [--archive-ext EXT | --archive-name NAME]...]" DISCARD_USAGE "\n"
            "         [--lazy-listener [--prepared IDLE_SECONDS [--spare]]]\n"
            "         [--forward] -- LISTENER [ARG]...\n"
            "       %s exec HOLDER_PID FILENAME ENVC [ENV]... ARGV0 [ARG]...\n"
            "       %s check | --version\n",
            g_prog, g_prog, g_prog);
    _exit(EXIT_USAGE);
}

/* ---------------------------------------------------------------- setup */

/* on: euid := real uid, keeping capabilities (SECBIT_NO_SETUID_FIXUP);
 * off: euid 0 again and securebits cleared, so the final drop clears the
 * capabilities as usual (drop_privileges verifies the bits). */
static int charge_user(int on)
{
    uid_t ruid = getuid();
    if (ruid == 0)
        return 0;
    if (on)
        return prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) != 0 ||
                       setresuid((uid_t)-1, ruid, (uid_t)-1) != 0
                   ? -1
                   : 0;
    return setresuid((uid_t)-1, 0, (uid_t)-1) != 0 ||
                   prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) != 0
               ? -1
               : 0;
}

/* The listener learns the command line's working directory from
 * SHOURNAL_CWD and runs in "/": it must not keep a mount busy while it
 * waits or stores.  We are the user here (privileges dropped). */
static int hand_over_cwd(void)
{
    char cwd[PATH_MAX];

    if (getcwd(cwd, sizeof cwd) != NULL && cwd[0] == '/') {
        if (setenv("SHOURNAL_CWD", cwd, 1) != 0)
            return -1;
    } else if (unsetenv("SHOURNAL_CWD") != 0) {
        return -1;
    }
    return chdir("/");
}

/* --lazy-listener: exec the listener (a Python start-up: CPU and, with a
 * cold cache, disk reads) only when the command line has ended (its
 * message or EOF on the control socket), when the holder's queue passes
 * QUEUE_PRESSURE (shournal_holder.c), or when the holder is gone -- not
 * while a short command runs. */
static void wait_for_listener_start(int pressure)
{
    struct pollfd p[2] = {{SHOURNAL_FD_SOCKET, POLLIN, 0}, {pressure, POLLIN, 0}};

    /* Woken when the shell ends the command line, we would preempt the
     * shell right before its prompt (and exec Python there): a SCHED_BATCH
     * task never preempts on wakeup.  Unprivileged both ways, and kept
     * across exec. */
    set_policy(SCHED_BATCH);
    while (poll(p, 2, -1) < 0 && errno == EINTR)
        ;
    if (p[0].revents && !p[1].revents) {
        /* The command line has ended: from here on the listener yields to
         * whatever the user runs next. */
        (void)setpriority(PRIO_PROCESS, 0, SHOURNAL_LISTENER_NICE);
    } else {
        /* Woken by the holder's queue (or its end) while the command runs:
         * keep up with it as an ordinary task. */
        set_policy(SCHED_OTHER);
    }
}

/* --prepared: the namespace waits, at the shell's prompt, to be taken by
 * the next command line (see struct shournal_go).  0: taken; -1: abandoned
 * (EOF, anything but GO, or idle for `idle_s` seconds).  We are the user
 * here (privileges dropped); whatever the shell sends is only compared. */
static int wait_for_go(long idle_s)
{
    struct pollfd p = {SHOURNAL_FD_SOCKET, POLLIN, 0};
    struct shournal_go m = {0, 0};
    struct timespec now;
    time_t deadline;
    ssize_t n;
    int rc;

    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
        return -1;
    deadline = now.tv_sec + (time_t)idle_s;
    for (;;) {
        if (clock_gettime(CLOCK_MONOTONIC, &now) != 0 || now.tv_sec >= deadline)
            return -1;
        rc = poll(&p, 1, (int)(deadline - now.tv_sec) * 1000);
        if (rc > 0)
            break;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
    do
        n = recv(SHOURNAL_FD_SOCKET, &m, sizeof m, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof m || m.type != SHOURNAL_MSG_GO)
        return -1;
    m.type = SHOURNAL_MSG_GO_ACK;
    return send(SHOURNAL_FD_SOCKET, &m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m ? 0 : -1;
}

/* setup's options, from argv alone (getopt would consult the environment:
 * POSIXLY_CORRECT).  Without options (no config seen yet: the first
 * command line of a fresh installation) the defaults are the config's; for
 * archiving, any extension (the listener filters, with the fd it gets). */
struct setup_args {
    struct holder_opts o;
    int no_read;
    int lazy;
    int forward;
    long prepared; /* idle seconds, 0: not prepared */
    int spare;
    int nexcl;
    char *excludes[SHOURNAL_MAX_EXCLUDES];
};

static int take_hash(struct setup_args *a, char *text, long n)
{
    (void)n;
    return parse_hash(text, &a->o.chunk, &a->o.reads);
}

static int take_archive_max(struct setup_args *a, char *text, long n)
{
    (void)text;
    a->o.archive_on = 1;
    a->o.archive_max = (uint64_t)n;
    return 0;
}

/* An extension (`name` 0) or a whole basename such as Makefile (1): the
 * same bounds and characters, one table of SHOURNAL_MAX_ARCHIVE_EXT. */
static int take_archive_entry(struct setup_args *a, char *text, int name)
{
    size_t el = strnlen(text, SHOURNAL_MAX_EXT_LEN + 1);
    if (el == 0 || el > SHOURNAL_MAX_EXT_LEN || strchr(text, '/') || strchr(text, '.') ||
        a->o.next >= SHOURNAL_MAX_ARCHIVE_EXT)
        return -1;
    a->o.is_name[a->o.next] = (unsigned char)name;
    a->o.ext[a->o.next++] = text;
    return 0;
}

static int take_archive_ext(struct setup_args *a, char *text, long n)
{
    (void)n;
    return take_archive_entry(a, text, 0);
}

static int take_archive_name(struct setup_args *a, char *text, long n)
{
    (void)n;
    return take_archive_entry(a, text, 1);
}

static int take_exclude(struct setup_args *a, char *text, long n)
{
    (void)n;
    if (text[0] != '/' || strnlen(text, PATH_MAX) >= PATH_MAX || a->nexcl >= SHOURNAL_MAX_EXCLUDES)
        return -1;
    a->excludes[a->nexcl++] = text;
    return 0;
}

/* OPT_FLAG stores `flag` in the int at `field`.  OPT_NUMBER takes a decimal
 * in [min, max] and stores it in the long at `field`, or hands it to
 * `take`.  OPT_TEXT hands the value to `take`, which validates it.  `take`
 * returns 0, or -1 for the usage message. */
enum setup_opt_kind { OPT_FLAG, OPT_NUMBER, OPT_TEXT };

struct setup_opt {
    const char *name;
    enum setup_opt_kind kind;
    size_t field;
    int flag;
    long min, max;
    int (*take)(struct setup_args *a, char *text, long n);
};

#define SETUP_FIELD(m) offsetof(struct setup_args, m)
static const struct setup_opt setup_opts[] = {
    {.name = "--no-read", .kind = OPT_FLAG, .field = SETUP_FIELD(no_read), .flag = 1},
    /* the config wants read events only of files the user may write (the
     * default): most reads (/usr) end here, in C */
    {.name = "--writable-reads", .kind = OPT_FLAG, .field = SETUP_FIELD(o.reads_need_write),
     .flag = 1},
    {.name = "--no-hash", .kind = OPT_FLAG, .field = SETUP_FIELD(o.hash_on), .flag = 0},
    {.name = "--hash", .kind = OPT_TEXT, .take = take_hash},
    {.name = "--archive-max-size", .kind = OPT_NUMBER, .min = 0, .max = LONG_MAX,
     .take = take_archive_max},
    {.name = "--archive-ext", .kind = OPT_TEXT, .take = take_archive_ext},
    {.name = "--archive-name", .kind = OPT_TEXT, .take = take_archive_name},
    {.name = "--no-archive", .kind = OPT_FLAG, .field = SETUP_FIELD(o.archive_on), .flag = 0},
#ifdef SHOURNAL_BENCH_FLOOR
    /* bench/ only (native/Makefile's bench-helper): the holder drops every
     * event unseen, the kernel's price alone.  Not in the installed helper. */
    {.name = "--discard-events", .kind = OPT_FLAG, .field = SETUP_FIELD(o.discard), .flag = 1},
#endif
    {.name = "--lazy-listener", .kind = OPT_FLAG, .field = SETUP_FIELD(lazy), .flag = 1},
    /* LISTENER is the store daemon's forwarder: see the end of cmd_setup */
    {.name = "--forward", .kind = OPT_FLAG, .field = SETUP_FIELD(forward), .flag = 1},
    {.name = "--prepared", .kind = OPT_NUMBER, .field = SETUP_FIELD(prepared), .min = 1,
     .max = MAX_PREPARED_IDLE_S},
    /* a second prepared namespace, on the socket on SHOURNAL_FD_SPARE: see
     * fork_spare */
    {.name = "--spare", .kind = OPT_FLAG, .field = SETUP_FIELD(spare), .flag = 1},
    {.name = "--exclude-mount", .kind = OPT_TEXT, .take = take_exclude},
};

/* argv[first..]: [opts] -- LISTENER [ARG]...; returns the index of
 * LISTENER (argc if it is missing).  Anything else: the usage message. */
static int parse_setup_args(int argc, char **argv, int first, struct setup_args *a)
{
    int i;

    for (i = first; i < argc; i++) {
        const struct setup_opt *opt = NULL;
        char *text = NULL;
        long n = 0;

        if (strcmp(argv[i], "--") == 0)
            return i + 1;
        for (size_t k = 0; k < sizeof setup_opts / sizeof setup_opts[0]; k++)
            if (strcmp(argv[i], setup_opts[k].name) == 0)
                opt = &setup_opts[k];
        if (opt == NULL)
            usage();
        if (opt->kind == OPT_FLAG) {
            *(int *)(void *)((char *)a + opt->field) = opt->flag;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        text = argv[++i];
        if (opt->kind == OPT_NUMBER) {
            if (parse_count(text, opt->max, &n) != 0 || n < opt->min)
                usage();
            if (opt->take == NULL) {
                *(long *)(void *)((char *)a + opt->field) = n;
                continue;
            }
        }
        if (opt->take(a, text, n) != 0)
            usage();
    }
    return i;
}

/* --spare: the shell takes two prepared namespaces from one exec of ours.
 * A copy of us, forked here -- checks done, nothing made yet, privileges
 * whole -- sets up the second one on the socket on SHOURNAL_FD_SPARE
 * exactly as we set up ours: its own namespace, fanotify group, holder
 * and drop.  An exec, the dynamic loader and the group database's
 * lookups (nss-systemd) are most of a set-up's CPU: one of each per two
 * command lines (docs/benchmarks.md).  Without the copy (a fork that
 * fails: the user's RLIMIT_NPROC) the shell sees EOF on that socket and
 * sets up that command line the usual way. */
static void fork_spare(void)
{
    pid_t pid = fork_counted(1);

    if (pid == 0 && dup2(SHOURNAL_FD_SPARE, SHOURNAL_FD_SOCKET) < 0)
        _exit(1);
    (void)close(SHOURNAL_FD_SPARE);
}

/* What the privileged part of `setup` made, for the unprivileged rest. */
struct setup_made {
    pid_t holder;
    uint32_t flags;
    int nsfd, sync, relay, pressure;
};

static char g_setup_fail[SHOURNAL_MAX_FAIL_LEN]; /* said after the drop */

static int setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int setup_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(g_setup_fail, sizeof g_setup_fail, fmt, ap) < 0)
        g_setup_fail[0] = '\0';
    va_end(ap);
    return -1;
}

/* The privileged part of `setup`: the checks, the namespace, the fanotify
 * group and its marks, the holder.  Returns -1 with g_setup_fail set. */
static int privileged_setup(struct setup_args *ap, const char *prog, struct setup_made *m)
{
    int fan, nsfd, relay[2], sync[2], readyfd[2], pressure[2], root_marked = 0, member;
    char ready = 0;
    ssize_t got;
    uint64_t mask = ap->no_read ? FAN_CLOSE_WRITE : FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE;
    uint32_t flags = 0;
    gid_t grp;
    pid_t holder, listener;

    if (geteuid() != 0)
        return setup_fail(
            "not setuid root (run: chown root %s && chmod u+s %s, or sudo make install)", prog,
            prog);
    if (shournal_gid(&grp) != 0)
        return setup_fail("group '%s' does not exist (groupadd --system %s)", SHOURNAL_GROUP,
                          SHOURNAL_GROUP);
    member = user_in_group(grp, 1);
    if (member != 0)
        return setup_fail("%s", member_refusal(member));
    if (ap->spare)
        fork_spare();
    /* The namespace and the fanotify group are counted (max_mnt_namespaces,
     * max_fanotify_groups) against the effective uid: make it the user's,
     * keeping our capabilities, so a user exhausts only his own limits. */
    if (charge_user(1) != 0)
        return setup_fail("cannot switch to the user's euid: %s", strerror(errno));
    if (unshare(CLONE_NEWNS) != 0)
        return setup_fail("unshare(CLONE_NEWNS): %s", strerror(errno));
    fan = fanotify_group(&flags);
    if (fan < 0)
        return setup_fail("fanotify_init: %s", strerror(errno));
    if (mark_mounts(fan, mask, ap->excludes, ap->nexcl, &root_marked) < 0)
        return setup_fail("cannot read /proc/self/mounts: %s", strerror(errno));
    if (!root_marked)
        return setup_fail("fanotify_mark on /: %s", strerror(errno));
    if (charge_user(0) != 0)
        return setup_fail("cannot switch back to euid 0: %s", strerror(errno));
    if (syscall(SYS_faccessat2, fan, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) != 0 && errno == ENOSYS)
        return setup_fail("this kernel lacks faccessat2 (Linux >= 5.8 needed)");
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, relay) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) != 0 ||
        pipe2(readyfd, O_CLOEXEC) != 0 || pipe2(pressure, O_CLOEXEC) != 0 ||
        fcntl(pressure[1], F_SETFL, O_NONBLOCK) != 0)
        return setup_fail("socketpair: %s", strerror(errno));

    listener = getpid(); /* we become the listener */
    holder = fork_counted(0);
    if (holder < 0)
        return setup_fail("fork: %s", strerror(errno));
    if (holder == 0) {
        (void)close(SHOURNAL_FD_SOCKET);
        (void)close(relay[1]);
        (void)close(sync[1]);
        (void)close(readyfd[0]);
        (void)close(pressure[0]);
        run_holder(fan, relay[0], sync[0], readyfd[1], pressure[1], grp, listener, &ap->o);
    }
    /* the group must never reach the listener: it is the user's code */
    (void)close(fan);
    (void)close(relay[0]);
    (void)close(sync[0]);
    (void)close(readyfd[1]);
    (void)close(pressure[1]);
    do
        got = read(readyfd[0], &ready, 1);
    while (got < 0 && errno == EINTR);
    if (got != 1)
        return setup_fail("namespace holder failed to start");
    (void)close(readyfd[0]);

    /* The shell keeps the namespace alive with this fd even if the
     * holder and the listener die, so its opens through the root fd keep
     * working; without CAP_SYS_ADMIN the fd cannot be used to join. */
    nsfd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (nsfd < 0)
        return setup_fail("open ns/mnt: %s", strerror(errno));
    m->holder = holder;
    m->flags = flags;
    m->nsfd = nsfd;
    m->sync = sync[1];
    m->relay = relay[1];
    m->pressure = pressure[0];
    return 0;
}

static int cmd_setup(int argc, char **argv)
{
    int i, rootfd, failed, dropped, drop_err;
    static struct setup_made m;
    static struct setup_args a = {.o = {.hash_on = 1,
                                        .chunk = SHOURNAL_DEFAULT_HASH_CHUNK,
                                        .reads = SHOURNAL_DEFAULT_HASH_READS,
                                        .archive_on = 1,
                                        .archive_max = SHOURNAL_DEFAULT_ARCHIVE_MAX}};

    /* argv: setup [opts] -- LISTENER [ARG]... */
    i = parse_setup_args(argc, argv, 2, &a);
    if (i >= argc || argv[i][0] != '/' || strnlen(argv[i], PATH_MAX) >= PATH_MAX ||
        (a.prepared && !a.lazy) || (a.spare && !a.prepared))
        usage();
    if (check_socket(SHOURNAL_FD_SOCKET) != 0 ||
        (a.spare && check_socket(SHOURNAL_FD_SPARE) != 0))
        usage();
    if (a.prepared) {
        /* Nothing waits for this set-up (the shell shows its prompt): it
         * must not take the CPU from the shell.  SCHED_BATCH never
         * preempts on wakeup (the holder goes back to SCHED_OTHER). */
        set_policy(SCHED_BATCH);
    }
    g_sock = SHOURNAL_FD_SOCKET;
    close_from((a.spare ? SHOURNAL_FD_SPARE : SHOURNAL_FD_SOCKET) + 1);

    failed = privileged_setup(&a, argv[0], &m);
    dropped = drop_privileges() == 0;
    drop_err = errno;
    /* As the user from here on, whatever was decided above. */
    if (failed)
        die_setup("%s", g_setup_fail);
    if (!dropped)
        die_setup("cannot drop privileges: %s", strerror(drop_err));
    /* The root directory of the namespace, opened
     * O_PATH, lets the shell open its redirections inside it. */
    rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        die_setup("open /: %s", strerror(errno));
    if (access(argv[i], X_OK) != 0)
        die_setup("listener %s: %s", argv[i], strerror(errno));
    if (send_setup_done(SHOURNAL_FD_SOCKET, m.holder, m.flags, rootfd, m.nsfd, m.sync) != 0)
        _exit(1); /* the shell is gone: nothing to observe */
    (void)close(rootfd);
    (void)close(m.nsfd);
    (void)close(m.sync);
    /* The listener leads an orphaned process group: if it is ever stopped,
     * the kernel sends SIGHUP on continue, which must not lose a command.
     * SIG_IGN survives the exec, so this covers the interpreter start too. */
    signal(SIGHUP, SIG_IGN);
    /* a failure leaves the listener to find its directory itself */
    if (hand_over_cwd() == 0 && a.lazy) {
        /* Not taken: nothing ran in the namespace; the holder follows us
         * out when the relay closes, and with it the fanotify group. */
        if (a.prepared && wait_for_go(a.prepared) != 0)
            _exit(0);
        wait_for_listener_start(m.pressure);
    } else if (a.prepared) {
        _exit(0); /* the shell sets up without us */
    }
    (void)close(m.pressure);

    /* The relay end may sit on a low number: move it high first so the
     * final dup2 cannot clobber the socket. */
    m.relay = fcntl(m.relay, F_DUPFD_CLOEXEC, 64);
    if (m.relay < 0 || move_fd(SHOURNAL_FD_SOCKET, SHOURNAL_FD_SOCKET) != 0 ||
        move_fd(m.relay, SHOURNAL_FD_EVENTS) != 0)
        _exit(1);
    close_from(SHOURNAL_FD_EVENTS + 1);
    /* --forward: LISTENER is shournal-forward, which only hands the command
     * line to the user's store daemon and waits for its answer.  We do its
     * first hand-over ourselves, as the user (privileges dropped for good
     * above), and exec it only if no daemon took the command line at once
     * (it waits for one that is starting, tries the next one after a
     * daemon that ended, or runs the Python listener): an exec, the
     * dynamic loader and the image's exit per command line saved (~0.7 ms
     * of CPU).  Not for the apparatus (see spawn_helper in
     * preload/spawn.c): our /proc/<pid>/environ is not the user's to
     * read. */
    if (a.forward && shournal_fw_forward_once(getenv("SHOURNAL_CWD")) == 0)
        _exit(0);
    execv(argv[i], argv + i);
    warn("exec %s: %s", argv[i], strerror(errno));
    _exit(127);
}

/* ----------------------------------------------------------------- exec */

static void exec_user(const char *filename, char **args, char **env) __attribute__((noreturn));
static void exec_user(const char *filename, char **args, char **env)
{
    int err;
    execve(filename, args, env);
    err = errno;
    warn("%s: %s", filename, strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

/* What the privileged part of `exec` decided.  It is acted on only after
 * the one drop of privileges in cmd_exec, as util-linux funnels privilege
 * through suid_drop(): nothing of the user's, not even a message, is
 * handled while we are root. */
enum join_verdict {
    JOIN_OK,         /* in the holder's namespace, under the caller's root */
    JOIN_UNOBSERVED, /* run the program where we are, unobserved */
    JOIN_REFUSED,    /* run nothing */
};

struct join_result {
    enum join_verdict verdict;
    char msg[SHOURNAL_MAX_FAIL_LEN]; /* said after the drop; empty: silence */
    char cwd[PATH_MAX];              /* JOIN_OK: the caller's directory by path */
    int have_cwd;
    int oldcwd; /* JOIN_OK: the caller's directory, O_PATH (or -1) */
};

static enum join_verdict join_say(struct join_result *r, enum join_verdict v, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));
static enum join_verdict join_say(struct join_result *r, enum join_verdict v, const char *fmt,
                                  ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(r->msg, sizeof r->msg, fmt, ap) < 0)
        r->msg[0] = '\0';
    va_end(ap);
    return r->verdict = v;
}

/* The privileged part of `exec`: every check, and the join itself. */
static enum join_verdict privileged_join(pid_t holder, struct join_result *r)
{
    char procpath[64];
    const char *refusal = NULL;
    int procfd, nsfd, rootfd, err, member;
    struct stat st, st_root;
    gid_t grp;

    r->msg[0] = '\0';
    r->have_cwd = 0;
    r->oldcwd = -1;
    if (geteuid() != 0 || shournal_gid(&grp) != 0)
        /* Misinstalled: never break the user's command. */
        return join_say(r, JOIN_UNOBSERVED,
                        "not observed (helper not setuid root or group missing)");
    member = user_in_group(grp, 0);
    if (member != 0)
        return join_say(r, JOIN_REFUSED, "%s", member_refusal(member));
    snprintf(procpath, sizeof procpath, "/proc/%d", (int)holder);
    procfd = open(procpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        /* The recorder of this command line is gone (it crashed or was
         * killed); the shell reports that once at the prompt, so stay
         * silent here: every exec of the command line would repeat it. */
        return r->verdict = JOIN_UNOBSERVED;
    /* procfd pins the process identity, so the check and the open of
     * ns/mnt below refer to the same process even if pids are reused. */
    if (fstat(procfd, &st) != 0 || st.st_uid != getuid() || st.st_gid != grp) {
        (void)close(procfd);
        return join_say(r, JOIN_REFUSED,
                        "refusing to join the namespace of pid %d: not created by shournal "
                        "for this user",
                        (int)holder);
    }
    nsfd = openat(procfd, "ns/mnt", O_RDONLY | O_CLOEXEC);
    err = errno;
    /* setns() puts us at the namespace's root: for a caller in a chroot,
     * outside his jail.  The holder unshared from inside the caller's root,
     * so its root is that directory's copy in the namespace; the program
     * runs there (below) or not at all. */
    rootfd = nsfd < 0 ? -1 : openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (nsfd >= 0 && rootfd < 0) {
        err = errno;
        (void)close(nsfd);
        nsfd = -1;
    }
    (void)close(procfd);
    if (nsfd < 0) {
        /* ENOENT: the holder is exiting -- as above, silently.  Anything
         * else is a missing privilege (a container without SYS_PTRACE):
         * say so, never lose events quietly. */
        if (err == ENOENT || err == ESRCH)
            return r->verdict = JOIN_UNOBSERVED;
        return join_say(r, JOIN_UNOBSERVED,
                        "not observed: cannot join the namespace: %s (in a container: "
                        "--cap-add SYS_PTRACE)",
                        strerror(err));
    }
    r->have_cwd = getcwd(r->cwd, sizeof r->cwd) != NULL && r->cwd[0] == '/';
    r->oldcwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ns_in_our_userns(nsfd) != 1)
        refusal = "it belongs to another user namespace";
    else if (stat("/", &st_root) != 0 || fstat(rootfd, &st) != 0 ||
             st.st_dev != st_root.st_dev || st.st_ino != st_root.st_ino)
        refusal = "made under another root directory (chroot)";
    if (refusal != NULL) {
        (void)close(nsfd);
        (void)close(rootfd);
        return join_say(r, JOIN_REFUSED, "refusing to join the namespace of pid %d: %s",
                        (int)holder, refusal);
    }
    if (setns(nsfd, CLONE_NEWNS) != 0) {
        err = errno;
        (void)close(nsfd);
        (void)close(rootfd);
        return join_say(r, JOIN_UNOBSERVED, "not observed: setns: %s", strerror(err));
    }
    (void)close(nsfd);
    /* Still privileged: back into the caller's root (its copy), verified
     * to be the same directory before anything of the user's runs. */
    if (fchdir(rootfd) != 0 || chroot(".") != 0 || stat("/", &st) != 0 ||
        st.st_dev != st_root.st_dev || st.st_ino != st_root.st_ino) {
        (void)close(rootfd);
        return join_say(r, JOIN_REFUSED,
                        "refusing to run: your root directory is not reachable in the "
                        "namespace of pid %d",
                        (int)holder);
    }
    (void)close(rootfd);
    return r->verdict = JOIN_OK;
}

static int cmd_exec(int argc, char **argv)
{
    pid_t holder;
    long envc;
    char **env, **args, *filename;
    struct stat st_old, st_new;
    static struct join_result r; /* PATH_MAX: off the user's stack */
    int dropped;

    /* argv: exec HOLDER_PID FILENAME ENVC [ENV]... ARGV0 [ARG]... */
    if (argc < 6 || parse_pid(argv[2], &holder) != 0)
        usage();
    filename = argv[3];
    if (filename[0] == '\0' || parse_count(argv[4], argc - 6, &envc) != 0)
        usage();
    for (long k = 0; k < envc; k++)
        if (strchr(argv[5 + k], '=') == NULL)
            usage();
    args = argv + 5 + envc;
    /* The env entries are moved into their own NULL terminated array. */
    env = calloc((size_t)envc + 1, sizeof *env);
    if (env == NULL)
        _exit(1);
    for (long k = 0; k < envc; k++)
        env[k] = argv[5 + k];

    (void)privileged_join(holder, &r);
    dropped = drop_privileges() == 0;
    /* As the user from here on, whatever was decided above. */
    if (r.verdict == JOIN_REFUSED) {
        warn("%s", r.msg);
        _exit(1);
    }
    if (!dropped) {
        warn("cannot drop privileges");
        _exit(1);
    }
    if (r.verdict == JOIN_UNOBSERVED) {
        if (r.msg[0] != '\0')
            warn("%s", r.msg);
        if (r.oldcwd >= 0)
            (void)close(r.oldcwd);
        exec_user(filename, args, env);
    }
    /* Re-enter the working directory by path (it is relative to the root
     * kept above) so relative opens go through the marked mounts. */
    if (!r.have_cwd || chdir(r.cwd) != 0 || r.oldcwd < 0 || fstat(r.oldcwd, &st_old) != 0 ||
        stat(".", &st_new) != 0 || st_old.st_dev != st_new.st_dev ||
        st_old.st_ino != st_new.st_ino) {
        if (r.oldcwd >= 0 && fchdir(r.oldcwd) == 0)
            warn("working directory not reachable in the namespace: relative paths unobserved");
    }
    if (r.oldcwd >= 0)
        (void)close(r.oldcwd);
    exec_user(filename, args, env);
}

/* ---------------------------------------------------------------- check */

/* Can we open the namespace of a process of another uid, as `exec` must
 * for a holder?  Containers without CAP_SYS_PTRACE cannot. */
static int check_join(void)
{
    uid_t uid = getuid() ? getuid() : 65534;
    char path[64];
    int fd, err = 0, ready[2];
    char c;
    pid_t child, parent = getpid();

    if (pipe2(ready, O_CLOEXEC) != 0)
        return errno;
    child = fork_counted(0);
    if (child < 0)
        return errno;
    if (child == 0) {
        /* A killed check must not leave us behind; set after the uid
         * change, which clears it. */
        if (setresuid(uid, uid, uid) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 ||
            getppid() != parent)
            _exit(1);
        (void)close(ready[0]);
        (void)close(ready[1]); /* EOF: our ids are set */
        pause();
        _exit(0);
    }
    (void)close(ready[1]);
    while (read(ready[0], &c, 1) < 0 && errno == EINTR)
        ;
    (void)close(ready[0]);
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)child);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        err = errno;
    else
        (void)close(fd);
    (void)kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    return err;
}

/* What `check` found while privileged; printed after the one drop. */
struct check_result {
    int root, group_member, group_missing, join_err, charge_err, unshare_err, fan_err;
    int probed, root_marked;
    uint32_t flags;
};

static void privileged_probe(struct check_result *c)
{
    gid_t grp;
    int fan;

    c->root = geteuid() == 0;
    if (shournal_gid(&grp) == 0)
        c->group_member = user_in_group(grp, 1);
    else
        c->group_missing = 1;
    if (!c->root)
        return;
    /* before the namespace below: the probe's child must not pin it */
    c->join_err = check_join();
    /* As in setup: the namespace and the fanotify group count against the
     * user, who could otherwise stop checks holding them until root has
     * none left. */
    if (charge_user(1) != 0) {
        c->charge_err = errno;
        return;
    }
    c->probed = 1;
    if (unshare(CLONE_NEWNS) != 0) {
        c->unshare_err = errno;
    } else if ((fan = fanotify_group(&c->flags)) < 0) {
        c->fan_err = errno;
    } else {
        mark_mounts(fan, FAN_CLOSE_WRITE, NULL, 0, &c->root_marked);
        (void)close(fan);
    }
    if (charge_user(0) != 0)
        _exit(1);
}

static int cmd_check(void)
{
    static struct check_result c;
    int ok = 1;

    privileged_probe(&c);
    if (drop_privileges() != 0)
        _exit(1);
    printf("version %s\n", SHOURNAL_VERSION);
    printf("setuid-root %s\n", c.root ? "ok" : "FAIL");
    if (c.group_missing) {
        printf("group FAIL missing\n");
        ok = 0;
    } else {
        printf("group %s\n",
               c.group_member > 0 ? "FAIL member" : c.group_member < 0 ? "FAIL unreadable" : "ok");
        ok &= c.group_member == 0;
    }
    if (!c.root) {
        ok = 0;
    } else if (!c.probed) {
        printf("unshare FAIL cannot switch to the user's euid: %s\n", strerror(c.charge_err));
        ok = 0;
    } else if (c.unshare_err) {
        printf("unshare FAIL %s\n", strerror(c.unshare_err));
        ok = 0;
    } else if (c.fan_err) {
        printf("fanotify FAIL %s\n", strerror(c.fan_err));
        ok = 0;
    } else {
        printf("fanotify %s\n", c.root_marked ? "ok" : "FAIL mark");
        printf("fd-error-reporting %s\n", (c.flags & SHOURNAL_SETUP_FD_ERROR) ? "yes" : "no");
        ok &= c.root_marked;
    }
    if (c.root) {
        printf("join %s%s\n", c.join_err ? "FAIL " : "ok", c.join_err ? strerror(c.join_err) : "");
        ok &= !c.join_err;
    }
    fflush(stdout);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    /* Never let a user's umask shape what we create while privileged; it
     * is given back on every drop (drop_privileges). */
    g_umask = umask(022);
    /* With fs.suid_dumpable=1 a setuid process is dumpable, and its core is
     * written as root into the caller's directory: the user could kill us
     * while privileged and keep an image of our memory.  The final drop
     * resets this from the sysctl (commit_creds), and the user's program
     * gets the usual rule at its exec. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        _exit(1);
    if (argc < 2)
        usage();
    if (strcmp(argv[1], "setup") == 0)
        return cmd_setup(argc, argv);
    if (strcmp(argv[1], "exec") == 0)
        return cmd_exec(argc, argv);
    if (argc == 2 && strcmp(argv[1], "check") == 0)
        return cmd_check();
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        if (drop_privileges() != 0)
            _exit(1);
        printf("shournal-suid %s\n", SHOURNAL_VERSION);
        return 0;
    }
    usage();
}
