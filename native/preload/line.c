/* A command line: its start (a namespace, taken prepared or set up now)
 * and its end (the text and status to the listener). */
#include "preload.h"

#define MAX_PENDING_LISTENERS 8
#define MAX_PENDING_WAIT_MS 2000

static void marker_path(char *buf, size_t n, pid_t pid, const char *suffix)
{
    snprintf(buf, n, "%s/%d.%s", g_rundir, (int)pid, suffix);
}

/* The holder takes each file's metadata and hash when it reads the close
 * event: a command line that overwrites what the previous one wrote must
 * not start before the previous holder has read all its events (pasted
 * lines, fast typists).  One round trip to C code, bounded, so a hung
 * holder never holds the prompt. */
static void sync_previous_holder(void)
{
    struct pollfd pfd = {g_prev_sync, POLLIN, 0};
    int64_t deadline = now_ns() + (int64_t)SHOURNAL_SYNC_TIMEOUT_MS * 1000000;
    char c = 's';

    if (g_prev_sync < 0)
        return;
    if (send(g_prev_sync, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
        for (;;) {
            int left = (int)((deadline - now_ns()) / 1000000);
            if (left <= 0 || poll(&pfd, 1, left) > 0 || errno != EINTR)
                break;
        }
    }
    close(g_prev_sync);
    g_prev_sync = -1;
}

/* Listeners of finished command lines still storing (markers <pid>.end and
 * <pid>.store of live processes, from every shell of this user).  A marker
 * of a dead process is a listener that died without storing (it removes its
 * markers whenever it ends by itself): the listener starts after its
 * command line has ended (--lazy-listener), so this is where such a death
 * is noticed -- one warning, by the shell that removes the marker. */
static int pending_listeners(void)
{
    DIR *d = opendir(g_rundir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 0 ||
            (strcmp(end, "." SHOURNAL_MARK_END) != 0 && strcmp(end, "." SHOURNAL_MARK_STORE) != 0))
            continue;
        /* our listeners run as us: EPERM is a reused pid, not one */
        if (process_lives((pid_t)pid)) {
            n++;
        } else if ((errno == ESRCH || errno == EPERM) && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            /* Said even when the start is on disk (whoever stores the line
             * from there names it too): a listener that cannot run at all
             * must not lose every line silently. */
            if (start_file_of(pid))
                warn_once("the recorder of an earlier command line died; its start is kept on "
                          "disk, to be stored as incomplete by the next listener or store daemon");
            else
                warn_once("the recorder of an earlier command line died; it was not recorded");
        }
    }
    closedir(d);
    return n;
}

/* Pasted lines do not wait for listeners, only for holders: without a
 * bound, a paste of 100 quick lines would run 100 Python listeners at
 * once.  Past a handful, let them catch up (bounded: never hold a prompt
 * for long). */
static void throttle_listeners(void)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    int64_t deadline = now_ns() + (int64_t)MAX_PENDING_WAIT_MS * 1000000;

    if (!g_rundir[0])
        return;
    while (pending_listeners() >= MAX_PENDING_LISTENERS && now_ns() < deadline)
        nanosleep(&ts, NULL);
}

/* The command line's UUID: random (version 4).  Without one (getrandom
 * failed) it is still recorded, and a second store of it is recognised by
 * its start time, text, session and directory instead. */
static void draw_uuid(void)
{
    ssize_t n;

    do
        n = getrandom(g_uuid, sizeof g_uuid, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof g_uuid) {
        warn_once("command lines get no UUID: getrandom: %s", n < 0 ? strerror(errno) : "short read");
        memset(g_uuid, 0, sizeof g_uuid);
        return;
    }
    g_uuid[6] = (uint8_t)(0x40 | (g_uuid[6] & 0x0f));
    g_uuid[8] = (uint8_t)(0x80 | (g_uuid[8] & 0x3f));
}

void do_prepare(void)
{
    struct shournal_setup_done done;
    char why[SHOURNAL_MAX_FAIL_LEN], path[PATH_MAX + 32];
    int sock, rootfd, nsfd, syncfd, fd;

    g_prepare_due = 0;
    sock = take_next_go(&done, &rootfd, &nsfd, &syncfd);
    sync_previous_holder();
    throttle_listeners();
    ensure_daemon();
    if (sock >= 0)
        sock = take_next_ack(sock, rootfd, nsfd, syncfd);
    if (sock < 0) {
        sock = start_helper(0, NULL, why, sizeof why);
        if (sock >= 0 && recv_setup(sock, &done, &rootfd, &nsfd, &syncfd, why, sizeof why) != 0) {
            close(sock);
            sock = -1;
        }
        if (sock < 0) {
            warn_once("not recording: %s", why);
            return;
        }
    }
    g_sock = move_high(sock, 1024, 0);
    g_rootfd = move_high(rootfd, g_sock, 1);
    g_nsfd = move_high(nsfd, g_rootfd, 1);
    g_syncfd = move_high(syncfd, g_nsfd, 1);
    g_holder = done.holder_pid;
    g_listener = done.listener_pid;
    g_start_ns = now_ns();
    draw_uuid();
    g_forked = 0;
    g_state = ST_WITHIN;
    g_last_warning[0] = '\0';
    if (g_rundir[0]) {
        marker_path(path, sizeof path, g_listener, SHOURNAL_MARK_RUN);
        fd = real_open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
            close(fd);
    }
    /* zsh's preexec hands the text in before this (text-raw); bash's
     * PS0 sends it from its command substitution ("start") */
    if (g_textfd >= 0) {
        char *text = take_text();
        if (text)
            send_start(text);
        free(text);
    }
}

/* PS0 bumped the exported _SHOURNAL_SEQ: a command line starts.  1 if
 * this call started it. */
int start_if_new_seq(void)
{
    const char *s;

    if (g_state != ST_IDLE || !is_shell() || g_in_trigger)
        return 0;
    s = getenv("_SHOURNAL_SEQ");
    if (s == NULL || strcmp(s, g_seq) == 0)
        return 0;
    snprintf(g_seq, sizeof g_seq, "%s", s);
    do_prepare();
    return 1;
}

/* Take the text the hook wrote; returns a malloc'd string or NULL.  At
 * most one byte more than the listener keeps: it marks the cut. */
char *take_text(void)
{
    char *buf, *p;
    struct stat st;
    size_t want, n = 0;
    if (g_textfd < 0)
        return NULL;
    want = SHOURNAL_MAX_COMMAND_LEN;
    if (fstat(g_textfd, &st) == 0 && st.st_size > 0)
        want = (size_t)st.st_size < (size_t)SHOURNAL_MAX_COMMAND_TEXT + 1
                   ? (size_t)st.st_size
                   : (size_t)SHOURNAL_MAX_COMMAND_TEXT + 1;
    buf = malloc(want + 1);
    if (buf == NULL) {
        close(g_textfd);
        g_textfd = -1;
        return NULL;
    }
    while (n < want) {
        ssize_t r = pread(g_textfd, buf + n, want - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(g_textfd);
    g_textfd = -1;
    buf[n] = '\0';
    p = buf;
    if (g_text_is_history) {
        /* "%5d%c %s\n": number, '*' or ' ' for modified entries, space */
        while (*p == ' ')
            p++;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == '*' || *p == ' ')
            p++;
        if (*p == ' ')
            p++;
        n = strlen(p);
        while (n > 0 && p[n - 1] == '\n') /* here-documents end in "\n\n" */
            p[--n] = '\0';
    }
    memmove(buf, p, strlen(p) + 1);
    return buf;
}

/* A text longer than one message: COMMAND_FD with a memfd holding it.
 * 0 sent, -1 (errno) failed. */
static int send_command_fd(struct shournal_command *m, const char *text, size_t len)
{
    struct iovec iov = {m, sizeof *m};
    size_t done = 0;
    int fd = memfd_create("shournal-command", MFD_CLOEXEC), rc, saved;

    if (fd < 0)
        return -1;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            saved = w < 0 ? errno : EIO;
            close(fd);
            errno = saved;
            return -1;
        }
        done += (size_t)w;
    }
    m->type = SHOURNAL_MSG_COMMAND_FD | (m->type & SHOURNAL_COMMAND_SHELL_ONLY);
    rc = shournal_send_fds(g_sock, &iov, 1, &fd, 1, MSG_DONTWAIT) < 0 ? -1 : 0;
    saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

void do_cleanup(const char *text, int retval)
{
    char buf[sizeof(struct shournal_command) + SHOURNAL_MAX_COMMAND_LEN];
    char from[PATH_MAX + 32], to[PATH_MAX + 32];
    struct shournal_command m;
    size_t len = text ? strlen(text) : 0;
    int died = 0, rc = 0;
    uint32_t shell_only = g_forked ? 0 : SHOURNAL_COMMAND_SHELL_ONLY;

    memset(&m, 0, sizeof m);
    m.type = SHOURNAL_MSG_COMMAND | shell_only;
    m.return_value = retval;
    m.start_ns = g_start_ns;
    m.end_ns = now_ns();
    memcpy(m.session, g_session, sizeof m.session);
    memcpy(m.uuid, g_uuid, sizeof m.uuid);
    if (text && len > SHOURNAL_MAX_COMMAND_LEN) {
        rc = send_command_fd(&m, text, len);
        if (rc != 0 && errno != EPIPE && errno != ECONNRESET && errno != ECONNREFUSED) {
            warn_once("command line of %zu bytes stored cut to %d: %s", len,
                      SHOURNAL_MAX_COMMAND_LEN, strerror(errno));
            m.type = SHOURNAL_MSG_COMMAND | shell_only;
            len = SHOURNAL_MAX_COMMAND_LEN;
        }
    }
    if (len <= SHOURNAL_MAX_COMMAND_LEN) {
        memcpy(buf, &m, sizeof m);
        if (text && len)
            memcpy(buf + sizeof m, text, len);
        /* No text (a dropped line, shournal disabled within it): an empty
         * one, so that the listener does not store the line's START. */
        rc = (int)send(g_sock, buf, sizeof m + len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (text && rc < 0 &&
        (errno == EPIPE || errno == ECONNRESET || errno == ECONNREFUSED)) {
        /* with its start on disk, the line is stored from there as
         * incomplete, and whoever does so says so, naming it */
        if (!start_file_left())
            warn_once("the recorder of this command died; it was not recorded");
        died = 1;
    }
    close(g_sock);
    close(g_rootfd);
    close(g_nsfd);
    if (g_prev_sync >= 0)
        close(g_prev_sync);
    g_prev_sync = g_syncfd;
    g_sock = g_rootfd = g_nsfd = g_syncfd = -1;
    g_state = ST_IDLE;
    if (g_rundir[0]) {
        marker_path(from, sizeof from, g_listener, SHOURNAL_MARK_RUN);
        marker_path(to, sizeof to, g_listener, SHOURNAL_MARK_END);
        /* a death already reported here must not be reported again */
        if (died)
            (void)unlink(from);
        else
            (void)rename(from, to);
    }
}
