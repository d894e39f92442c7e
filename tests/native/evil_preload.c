/* tests/system/test_suid_security.py: a library the attacks try to get loaded
 * into the setuid helper (LD_PRELOAD, LD_LIBRARY_PATH...).  Built with
 * -DEVIL_MARKER="<path>". */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
/* Loaded means pwned: leave a line naming the ids we were loaded with. */
__attribute__((constructor)) static void evil(void)
{
    char line[96];
    int fd = open(EVIL_MARKER, O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (fd < 0)
        return;
    int n = snprintf(line, sizeof line, "pid=%d uid=%d euid=%d\n", (int)getpid(),
                     (int)getuid(), (int)geteuid());
    if (write(fd, line, (size_t)n) < 0) {}
    close(fd);
}
