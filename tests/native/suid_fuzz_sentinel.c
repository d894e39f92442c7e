/* suid_fuzz_sentinel: the program tests/system/test_suid_fuzz.py hands the setuid
 * helper to run (exec's FILENAME, setup's LISTENER).
 *
 *   suid_fuzz_sentinel [HEX]...
 *
 * Leaves SENTINEL_MARKS/ran.PID (created O_EXCL by whoever we run as: a
 * file owned by root means we ran as root) holding a copy of
 * /proc/self/status (ids, groups, capabilities).  Then, when fd 4 is a
 * socket (we are the listener: the relay to the holder), sends each HEX (the
 * first MAX_SENDS; other arguments are skipped) as one message and takes
 * whatever answer comes within 20 ms. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SENTINEL_MARKS
#error "build with -DSENTINEL_MARKS='\"/dir\"'"
#endif

#define MAX_SENDS 4

static unsigned char buf[256 * 1024];

int main(int argc, char **argv)
{
    char path[4096];
    struct stat st;
    ssize_t n;
    int in, out;

    snprintf(path, sizeof path, "%s/ran.%d", SENTINEL_MARKS, (int)getpid());
    out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    in = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0)
        return 1;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            return 1;
    close(in);
    close(out);
    if (fstat(4, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    for (int i = 1, sends = 0; i < argc && sends < MAX_SENDS; i++) {
        size_t len = strlen(argv[i]) / 2;
        unsigned v;
        if (len > sizeof buf || strspn(argv[i], "0123456789abcdef") != 2 * len)
            continue;
        for (size_t k = 0; k < len; k++) {
            if (sscanf(argv[i] + 2 * k, "%2x", &v) != 1)
                v = 0;
            buf[k] = (unsigned char)v;
        }
        sends++;
        (void)send(4, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        struct pollfd p = {4, POLLIN, 0};
        if (poll(&p, 1, 20) == 1)
            (void)recv(4, buf, sizeof buf, MSG_DONTWAIT);
    }
    return 0;
}
