/* shournal-forward: the listener shournal-suid execs for a command line
 * (as the user, privileges dropped for good, the control socket on fd 3
 * and the holder's relay on fd 4).  Instead of starting Python per command
 * line it hands both fds to the user's store daemon (shournal/capture/daemon.py)
 * over <runtime dir>/daemon.<journal key>.sock (the shell starts the daemon, see
 * ensure_daemon() in preload/daemon.c), and waits -- blocked, no CPU -- until the daemon answers that the command
 * line is in its durable spool.  Waiting keeps the markers named after our
 * pid meaningful: the shell and `shournal query` see a live recorder while
 * the daemon works on the command line, and a marker of a dead process if
 * the daemon was killed before it spooled it (the shell reports that).
 *
 * If no daemon can be reached within CONNECT_TIMEOUT_MS, the Python
 * listener is exec'd with the fds as they are: the command line is still
 * recorded, the old way.  A daemon that ends before it answers (killed)
 * is replaced the same way: we still hold both fds.
 *
 * Unprivileged code, but it runs for every command line: libc only, no
 * unbounded buffers, every return value checked. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shournal_fdpass.h"
#include "shournal_forward.h"
#include "shournal_protocol.h"

#ifndef SHOURNAL_DAEMON_PATH
#define SHOURNAL_DAEMON_PATH "/usr/local/libexec/shournal/shournal-daemon"
#endif
#ifndef SHOURNAL_PY_LISTENER_PATH
#define SHOURNAL_PY_LISTENER_PATH "/usr/local/libexec/shournal/shournal-listener"
#endif

/* A Python daemon needs ~0.2 s to bind its socket (more with a cold
 * cache, seconds on a busy machine). */
#define CONNECT_TIMEOUT_MS 10000
#define BACKOFF_MIN_MS 2
#define BACKOFF_MAX_MS 50
/* Daemons that may end (killed) before they spool one command line; then
 * the Python listener takes it. */
#define MAX_HANDOVERS 3

static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const char *env_path(const char *name, const char *fallback)
{
    const char *s = getenv(name);
    return s && s[0] == '/' ? s : fallback;
}

/* Start the daemon detached (own session, no fds of ours: the control
 * socket must never outlive the command line in a stray process). */
static void spawn_daemon(const char *path)
{
    pid_t pid = fork(), gc;
    int status, fd;

    if (pid < 0)
        return;
    if (pid == 0) {
        if (setsid() < 0)
            _exit(1);
        gc = fork();
        if (gc != 0)
            _exit(gc < 0 ? 1 : 0);
        if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
            for (fd = 3; fd < 1024; fd++)
                (void)close(fd);
        }
        fd = open("/dev/null", O_RDWR);
        if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(1);
        if (fd > 2)
            (void)close(fd);
        if (chdir("/") != 0)
            _exit(1);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    struct sockaddr_un addr;
    const char *fallback = env_path("SHOURNAL_PY_LISTENER", SHOURNAL_PY_LISTENER_PATH);
    int64_t start;
    long backoff;
    int s = -1, tries;
    struct stat st;

    if (argc == 2 && strcmp(argv[1], "--start-daemon") == 0) {
        /* The shell (preload library) starts the daemon through us, so
         * that it is detached and not the shell's child. */
        spawn_daemon(env_path("SHOURNAL_DAEMON", SHOURNAL_DAEMON_PATH));
        return 0;
    }
    if (argc != 1 || fstat(SHOURNAL_FD_SOCKET, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        fstat(SHOURNAL_FD_EVENTS, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        fputs("shournal-forward: started by shournal-suid only\n", stderr);
        return 2;
    }
    /* We run inside the command line's mount namespace: a daemon started
     * here would keep it (and be observed by it).  The shell starts it;
     * a daemon on its way out (idle) or still starting is waited for. */
    /* We keep our copies of the fds until the daemon answers: a daemon
     * killed before it spooled the command line leaves it to the next
     * daemon (or the fallback), which goes on reading where it stopped
     * (the control message it took it left in the spool directory, see
     * shournal.capture.spool.keep_started). */
    if (shournal_fw_daemon_addr(&addr) == 0) {
        for (tries = 0; tries < MAX_HANDOVERS; tries++) {
            start = now_ms();
            backoff = BACKOFF_MIN_MS;
            while ((s = shournal_fw_connect(&addr)) < 0 && now_ms() - start < CONNECT_TIMEOUT_MS) {
                if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN)
                    break;
                sleep_ms(backoff);
                if (backoff < BACKOFF_MAX_MS)
                    backoff *= 2;
            }
            if (s < 0)
                break;
            if (shournal_fw_hand_over(s, getenv("SHOURNAL_CWD"), 0) == 0)
                return 0;
            /* the daemon ended without spooling it: the next one */
        }
    }
    /* No daemon: record this command line the old way. */
    execl(fallback, fallback, (char *)NULL);
    fprintf(stderr, "shournal-forward: %s: %s\n", fallback, strerror(errno));
    return 1;
}
