/* The command line's start record: on disk before the line runs, and to
 * its holder. */
#include "preload.h"

/* <data dir>/shournal/spool/<journal key>/starts (O_PATH): the command
 * lines' starts on disk (see write_start_file); -1: none are kept.  The
 * journal key it is of (see child_env in spawn.c). */
static int g_startsfd = -1;
static char g_starts_key[SHOURNAL_KEY_LEN + 1];

/* A private directory of ours (not a link), made if missing. */
static int private_dir(int dirfd, const char *name)
{
    struct stat st;
    int fd;

    if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
        return -1;
    fd = real_openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Open <data dir>/shournal/spool/<journal key>/starts as shournal.capture.spool does
 * (the data directory as shournal._paths.data_dir: $XDG_DATA_HOME if
 * absolute, else ~/.local/share): the shournal directory may be a link
 * (the Docker edition's shared /journal) but must be ours and writable by
 * nobody else; spool and starts are private directories.  Once per
 * `enable`, and again when the directory was removed meanwhile. */
void setup_starts(void)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char path[PATH_MAX];
    struct stat st;
    int top, spool, keyed;

    if (g_startsfd >= 0)
        close(g_startsfd);
    g_startsfd = -1;
    shournal_journal_key(g_starts_key);
    if (xdg && xdg[0] == '/')
        snprintf(path, sizeof path, "%.4000s/shournal", xdg);
    else if (home && home[0] == '/')
        snprintf(path, sizeof path, "%.4000s/.local/share/shournal", home);
    else
        return;
    for (char *p = path + 1; *p; p++) { /* mkdir -p; as the listener would */
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            break;
        }
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        goto fail;
    top = real_open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        goto fail;
    if (fstat(top, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 022) != 0) {
        close(top);
        errno = EPERM;
        goto fail;
    }
    spool = private_dir(top, "spool");
    close(top);
    if (spool < 0)
        goto fail;
    keyed = private_dir(spool, g_starts_key);
    close(spool);
    if (keyed < 0)
        goto fail;
    top = private_dir(keyed, SHOURNAL_STARTS_DIR);
    close(keyed);
    if (top < 0)
        goto fail;
    g_startsfd = move_high(top, 1024, 1);
    return;
fail:
    warn_once("command lines are not kept on disk before they run: %.200s/spool: %s", path,
              strerror(errno));
}

/* Field 22 of /proc/<pid>/stat: when the process started (clock ticks
 * since boot), which tells it from a later process with its pid; 0 if
 * unknown. */
static unsigned long long proc_starttime(pid_t pid)
{
    char buf[512], *p = proc_stat_fields(pid, buf, sizeof buf);
    int field;

    for (field = 2; field < 22 && p; field++) /* then p: the space before field+1 */
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* zlib's CRC-32 (the spool's frames) */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
    static uint32_t table[256];
    const unsigned char *b = data;

    if (table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    }
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* "<listener pid>-<session hex>-<start_ns>" (shournal_protocol.h) */
static void start_file_name(char *buf, size_t n)
{
    char sid[2 * sizeof g_session + 1];

    for (size_t i = 0; i < sizeof g_session; i++)
        snprintf(sid + 2 * i, 3, "%02x", g_session[i]);
    snprintf(buf, n, "%d-%s-%lld", (int)g_listener, sid, (long long)g_start_ns);
}

/* The command line's start on disk before the line runs (see
 * shournal_start_file): a recorder killed, or a machine crash, while it
 * runs must not take the line with it.  No fsync: the prompt must not
 * wait for the disk (what a power loss may take: docs/design.md). */
static void write_start_file(const char *text)
{
    struct shournal_start_file sf;
    char cwd[PATH_MAX], name[96], tmp[100];
    uint32_t frame[3];
    size_t cwdlen, textlen = strlen(text), total = 0, done = 0;
    struct iovec iov[4];
    char key[SHOURNAL_KEY_LEN + 1];
    int fd, i;

    shournal_journal_key(key);
    if (strcmp(key, g_starts_key) != 0) /* the line's journal changed */
        setup_starts();
    if (g_startsfd < 0)
        return;
    if (getcwd(cwd, sizeof cwd) == NULL)
        cwd[0] = '\0';
    cwdlen = strlen(cwd);
    if (textlen > SHOURNAL_MAX_COMMAND_TEXT + 1) /* one byte more: cut, marked */
        textlen = SHOURNAL_MAX_COMMAND_TEXT + 1;
    memset(&sf, 0, sizeof sf);
    sf.format = SHOURNAL_START_FORMAT;
    sf.holder_pid = g_holder;
    sf.listener_pid = g_listener;
    sf.cwd_len = (uint32_t)cwdlen;
    sf.holder_starttime = proc_starttime(g_holder);
    sf.listener_starttime = proc_starttime(g_listener);
    sf.start_ns = g_start_ns;
    memcpy(sf.session, g_session, sizeof sf.session);
    memcpy(sf.uuid, g_uuid, sizeof sf.uuid);
    memcpy(&frame[0], "SHSP", 4);
    frame[1] = (uint32_t)(sizeof sf + cwdlen + textlen);
    frame[2] = crc32_update(0, &frame[1], 4);
    frame[2] = crc32_update(frame[2], &sf, sizeof sf);
    frame[2] = crc32_update(frame[2], cwd, cwdlen);
    frame[2] = crc32_update(frame[2], text, textlen);
    iov[0] = (struct iovec){frame, sizeof frame};
    iov[1] = (struct iovec){&sf, sizeof sf};
    iov[2] = (struct iovec){cwd, cwdlen};
    iov[3] = (struct iovec){(void *)text, textlen};
    for (i = 0; i < 4; i++)
        total += iov[i].iov_len;
    start_file_name(name, sizeof name);
    snprintf(tmp, sizeof tmp, ".%s", name);
    fd = real_openat(g_startsfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT) { /* the directory was removed: again */
        setup_starts();
        if (g_startsfd < 0)
            return;
        fd = real_openat(g_startsfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0600);
    }
    if (fd < 0)
        goto fail;
    for (i = 0; done < total;) {
        ssize_t w = writev(fd, iov + i, 4 - i);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            close(fd);
            (void)unlinkat(g_startsfd, tmp, 0);
            goto fail;
        }
        done += (size_t)w;
        while (i < 4 && (size_t)w >= iov[i].iov_len) {
            w -= (ssize_t)iov[i].iov_len;
            i++;
        }
        if (i < 4) {
            iov[i].iov_base = (char *)iov[i].iov_base + w;
            iov[i].iov_len -= (size_t)w;
        }
    }
    if (close(fd) != 0 || renameat(g_startsfd, tmp, g_startsfd, name) != 0) {
        int saved = errno;
        (void)unlinkat(g_startsfd, tmp, 0);
        errno = saved;
        goto fail;
    }
    return;
fail:
    warn_once("the start of this command line is not on disk: %s", strerror(errno));
}

/* Is this command line's start on disk?  (Then it is stored from there
 * if its recorder died: see shournal.capture.spool.recover_starts.) */
int start_file_left(void)
{
    char name[96];

    if (g_startsfd < 0)
        return 0;
    start_file_name(name, sizeof name);
    return faccessat(g_startsfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Is a start of the listener `pid` on disk (a recorder that died before
 * storing its line, which is then stored from its start)? */
int start_file_of(long pid)
{
    char prefix[24];
    size_t plen;
    struct dirent *e;
    DIR *d;
    int fd, found = 0;

    if (g_startsfd < 0)
        return 0;
    plen = (size_t)snprintf(prefix, sizeof prefix, "%ld-", pid);
    fd = real_openat(g_startsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    while (!found && (e = readdir(d)) != NULL)
        found = strncmp(e->d_name, prefix, plen) == 0;
    closedir(d);
    return found;
}

/* The command line's start (see SHOURNAL_MSG_START): to the holder, which
 * keeps it for the listener, before any of the line's programs runs.  One
 * non-blocking send of the text the hook gave us; nothing is sent without
 * one (a line the user keeps out of history, or no hook for it).  A
 * failure costs only the record of a line whose end never comes. */
void send_start(const char *text)
{
    struct shournal_command m;
    size_t len = strlen(text);
    struct iovec iov[2];
    struct msghdr mh = {0};

    if (g_syncfd < 0 || text[0] == '\0')
        return;
    write_start_file(text);
    memset(&m, 0, sizeof m);
    m.type = SHOURNAL_MSG_START;
    m.return_value = SHOURNAL_RETURN_VALUE_UNKNOWN;
    m.start_ns = g_start_ns;
    memcpy(m.session, g_session, sizeof m.session);
    memcpy(m.uuid, g_uuid, sizeof m.uuid);
    iov[0].iov_base = &m;
    iov[0].iov_len = sizeof m;
    iov[1].iov_base = (void *)text;
    iov[1].iov_len = len > SHOURNAL_MAX_START_TEXT ? SHOURNAL_MAX_START_TEXT + 1 : len;
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    (void)sendmsg(g_syncfd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}
