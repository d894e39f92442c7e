/* tests/system/test_suid_security.py: the user's attempts on the helper's
 * processes (proc files, ptrace, process_vm_*, pidfd, setns). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
/* tamper PID [NSFD]: every way we know to get at another process; one line
 * "what errno" each (errno 0: it worked). */
static void report(const char *what, long rc) { printf("%s %d\n", what, rc < 0 ? errno : 0); }
static void try_open(int pid, const char *name, int flags, const char *label)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/%s", pid, name);
    int fd = open(p, flags);
    report(label, fd);
    if (fd >= 0)
        close(fd);
}
static void try_link(int pid, const char *name, const char *label)
{
    char p[64], t[PATH_MAX];
    snprintf(p, sizeof p, "/proc/%d/%s", pid, name);
    report(label, readlink(p, t, sizeof t));
}
int main(int argc, char **argv)
{
    int pid = atoi(argv[1]);
    char b[8];
    struct iovec l = {b, sizeof b}, r = {(void *)0x10000, sizeof b};
    try_open(pid, "environ", O_RDONLY, "open-environ");
    try_open(pid, "mem", O_RDONLY, "open-mem");
    try_open(pid, "mem", O_RDWR, "open-mem-rw");
    try_open(pid, "auxv", O_RDONLY, "open-auxv");
    try_open(pid, "maps", O_RDONLY, "open-maps");
    try_open(pid, "ns/mnt", O_RDONLY, "open-ns-mnt");
    try_link(pid, "cwd", "readlink-cwd");
    try_link(pid, "root", "readlink-root");
    try_link(pid, "exe", "readlink-exe");
    try_link(pid, "ns/mnt", "readlink-ns-mnt");
    long a = ptrace(PTRACE_ATTACH, pid, 0, 0);
    report("ptrace-attach", a);
    if (a == 0) {
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, 0, 0);
        kill(pid, SIGCONT);
    }
    long s = ptrace(PTRACE_SEIZE, pid, 0, 0);
    report("ptrace-seize", s);
    report("process_vm_readv", process_vm_readv(pid, &l, 1, &r, 1, 0));
    report("process_vm_writev", process_vm_writev(pid, &l, 1, &r, 1, 0));
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) {
#ifdef SYS_pidfd_getfd
        report("pidfd_getfd", syscall(SYS_pidfd_getfd, pfd, 0, 0));
#endif
        report("setns-pidfd", setns(pfd, CLONE_NEWNS));
    }
    if (argc > 2)
        report("setns-handed-fd", setns(atoi(argv[2]), CLONE_NEWNS));
    fflush(stdout);
    return 0;
}
