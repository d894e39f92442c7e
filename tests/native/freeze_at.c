/* freeze_at UID GID SYSCALL PROGRAM [ARG]...
 *
 * For the tests (run as root): run PROGRAM as UID:GID (no supplementary
 * groups, stdio on /dev/null) under ptrace and, at the first successful
 * return of SYSCALL, leave it stopped by SIGSTOP -- what a user does to his
 * own process at the right moment, here without depending on timing.  The
 * tracer is root, so a setuid PROGRAM keeps its privilege.  Prints
 * "PID RVAL" (RVAL: what the call returned) and exits 0 with PROGRAM
 * stopped and untraced; prints "exited STATUS" and exits 1 if PROGRAM ends
 * first.  SYSCALL: unshare, fanotify_init or fork (clone, clone3). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int wanted(const char *name, long nr)
{
    if (strcmp(name, "unshare") == 0)
        return nr == SYS_unshare;
    if (strcmp(name, "fanotify_init") == 0)
        return nr == SYS_fanotify_init;
    if (strcmp(name, "fork") == 0)
        return nr == SYS_clone || nr == SYS_clone3 || nr == SYS_fork;
    return 0;
}

int main(int argc, char **argv)
{
    uid_t uid;
    gid_t gid;
    pid_t pid;
    int st, sig = 0;
    long nr = -1;

    if (argc < 5 || (strcmp(argv[3], "unshare") != 0 && strcmp(argv[3], "fanotify_init") != 0 &&
                     strcmp(argv[3], "fork") != 0)) {
        fprintf(stderr, "usage: freeze_at UID GID unshare|fanotify_init|fork PROGRAM [ARG]...\n");
        return 2;
    }
    uid = (uid_t)strtoul(argv[1], NULL, 10);
    gid = (gid_t)strtoul(argv[2], NULL, 10);
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
            _exit(126);
        /* traced while still root: the kernel judges the tracer by the
         * credential of this moment when the setuid exec comes */
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0 || setgroups(0, NULL) != 0 ||
            setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
            _exit(126);
        execv(argv[4], argv + 4);
        _exit(127);
    }
    /* the exec stop */
    if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st) ||
        ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL) != 0) {
        printf("exited %d\n", st);
        return 1;
    }
    for (;;) {
        struct __ptrace_syscall_info info;
        if (ptrace(PTRACE_SYSCALL, pid, 0, sig) != 0 || waitpid(pid, &st, 0) != pid)
            return 1;
        sig = 0;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            printf("exited %d\n", st);
            return 1;
        }
        if (!WIFSTOPPED(st))
            continue;
        if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
            sig = WSTOPSIG(st); /* not ours: deliver it */
            continue;
        }
        if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info, &info) <= 0)
            return 1;
        if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
            nr = (long)info.entry.nr;
        } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && wanted(argv[3], nr) &&
                   !info.exit.is_error) {
            /* pending until it leaves the call, i.e. right after it */
            if (kill(pid, SIGSTOP) != 0 || ptrace(PTRACE_DETACH, pid, 0, 0) != 0)
                return 1;
            printf("%d %lld\n", (int)pid, (long long)info.exit.rval);
            return 0;
        }
    }
}
