"""cffi build script (API mode): the C compiler checks our declarations
against the system headers.  Imported only at build time."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
#define FAN_CLOEXEC ...
#define FAN_NONBLOCK ...
#define FAN_CLASS_NOTIF ...
#define FAN_MARK_ADD ...
#define FAN_MARK_MOUNT ...
#define FAN_CLOSE_WRITE ...
#define FAN_CLOSE_NOWRITE ...
#define FAN_Q_OVERFLOW ...
#define FAN_NOFD ...
#define FANOTIFY_METADATA_VERSION ...
#define O_LARGEFILE ...
#define O_NOATIME ...
struct fanotify_event_metadata {
    uint32_t event_len;
    uint8_t vers;
    uint16_t metadata_len;
    uint64_t mask;
    int32_t fd;
    int32_t pid;
    ...;
};
int fanotify_init(unsigned int flags, unsigned int event_f_flags);
int fanotify_mark(int fd, unsigned int flags, uint64_t mask, int dirfd, const char *path);
"""
)
ffibuilder.set_source(
    "shournal._fanotify_cffi",
    "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <sys/fanotify.h>\n",
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
