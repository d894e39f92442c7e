/* tests/system/test_suid_security.py: a setuid-root program whose reads must
 * never be recorded for the user. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Installed setuid root by the tests: opens, reads and closes each file. */
int main(int argc, char **argv)
{
    char buf[4096];
    int rc = 0;
    printf("euid %d\n", (int)geteuid());
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            printf("fail %s %s\n", argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        printf("read %s %zd\n", argv[i], n);
    }
    return rc;
}
