/* The triggers: the shell integration opens "_///shournal///_/<action>"
 * (no fork) and reads the response. */
#include "preload.h"

static void b64(const uint8_t *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i, o = 0;
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = t[v >> 6 & 63];
        out[o++] = t[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

static void do_enable(void)
{
    const char *s;
    int64_t t = now_ns() / 1000000; /* UUIDv7: 48 bit ms timestamp, random rest */

    if (g_state == ST_WITHIN)
        do_cleanup(NULL, 0);
    drop_next(); /* made with the old settings */
    g_shell_pid = getpid();
    if ((s = getenv("SHOURNAL_SUID_PATH")) && s[0] == '/')
        snprintf(g_suid, sizeof g_suid, "%s", s);
    if ((s = getenv("SHOURNAL_LISTENER")) && s[0] == '/')
        snprintf(g_listener_path, sizeof g_listener_path, "%s", s);
    if (getrandom(g_session, sizeof g_session, 0) != (ssize_t)sizeof g_session) {
        for (size_t i = 0; i < sizeof g_session; i++)
            g_session[i] = (uint8_t)(rand() ^ (t >> (i % 8)));
    }
    for (int i = 0; i < 6; i++)
        g_session[i] = (uint8_t)(t >> (40 - 8 * i));
    g_session[6] = (uint8_t)(0x70 | (g_session[6] & 0x0f));
    g_session[8] = (uint8_t)(0x80 | (g_session[8] & 0x3f));
    s = getenv("_SHOURNAL_SEQ");
    snprintf(g_seq, sizeof g_seq, "%s", s ? s : "");
    setup_rundir();
    setup_starts();
    if (g_mounts_fd < 0) {
        int fd = real_open("/proc/self/mounts", O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            g_mounts_fd = move_high(fd, 1024, 1);
    }
    g_last_warning[0] = '\0';
    g_state = ST_IDLE;
}

/* "ok ...\n" and then any warnings, one per line */
static int respond(const char *text)
{
    int fd = memfd_create("shournal-trigger", MFD_CLOEXEC);
    char out[sizeof g_pending + 160];
    size_t len;
    snprintf(out, sizeof out, "%.150s\n%s", text, g_pending);
    g_pending[0] = '\0';
    len = strlen(out);
    if (fd < 0)
        return -1;
    if (write(fd, out, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        errno = EIO;
        return -1;
    }
    return fd;
}

static int handle_trigger_in(const char *action);

int handle_trigger(const char *action)
{
    int fd;
    g_in_trigger = 1;
    fd = handle_trigger_in(action);
    g_in_trigger = 0;
    return fd;
}

static int handle_trigger_in(const char *action)
{
    char resp[128];

    if (strcmp(action, "status") == 0) {
        static const char *const names[] = {"disabled", "idle", "within"};
        snprintf(resp, sizeof resp, "ok %s", names[g_state]);
        return respond(resp);
    }
    /* bash's PS0 forks its command substitution when the command line
     * has started (see fork() in wrappers.c): that child hands in the
     * line's text (text-history, then start), to the line's holder it
     * inherited. */
    if (!is_shell() && g_state == ST_WITHIN &&
        (strcmp(action, "text-history") == 0 || strncmp(action, "start", 5) == 0)) {
        if (action[0] == 's') {
            /* start[/s]: s = drop a space-prefixed line (see cleanup) */
            const char *flags = strchr(action, '/');
            char *text = take_text();
            if (text && !(flags && strchr(flags, 's') && text[0] == ' '))
                send_start(text);
            free(text);
            return respond("ok");
        }
    } else if (strcmp(action, "enable") != 0 && !is_shell()) {
        return respond("err not the shell that enabled shournal");
    }
    if (strcmp(action, "enable") == 0) {
        char sid[32];
        do_enable();
        b64(g_session, sizeof g_session, sid);
        snprintf(resp, sizeof resp, "ok %s", sid);
        prepare_next();
        return respond(resp);
    }
    if (strcmp(action, "disable") == 0) {
        if (g_state == ST_WITHIN)
            do_cleanup(NULL, 0);
        drop_next();
        if (g_prev_sync >= 0) { /* nothing follows to sync for */
            close(g_prev_sync);
            g_prev_sync = -1;
        }
        g_state = ST_DISABLED;
        return respond("ok");
    }
    if (strcmp(action, "histcontrol") == 0) /* see hold_ignorespace() in bash.c */
        return respond(hold_ignorespace() ? "ok" : "err bash exports no history_control");
    if (strcmp(action, "ps0-fast") == 0) /* see getrandom() in wrappers.c */
        return respond(bash_api() ? "ok" : "err bash exports no history API");
    if (strcmp(action, "prepare") == 0) {
        if (g_state == ST_IDLE) {
            do_prepare();
            prepare_if_typed_ahead();
        }
        return respond("ok");
    }
    if (strcmp(action, "text-history") == 0 || strcmp(action, "text-raw") == 0) {
        int fd = memfd_create("shournal-text", MFD_CLOEXEC);
        if (fd < 0)
            return -1;
        if (g_textfd >= 0)
            close(g_textfd);
        g_textfd = fd;
        g_text_is_history = action[5] == 'h';
        return fcntl(fd, F_DUPFD_CLOEXEC, 10);
    }
    if (strncmp(action, "cleanup/", 8) == 0) {
        /* cleanup/<status>[/FLAGS]: s = drop space-prefixed lines (emulated
         * HISTCONTROL=ignorespace / zsh HIST_IGNORE_SPACE); u = the hook
         * could not see the command line's status; h = the text is bash's
         * newest history entry, read here (else the hook wrote it to
         * text-history or text-raw).  A prompt without a command line (an
         * empty line, a hook run twice) drops nothing. */
        char *flags = strchr(action + 8, '/'), *text;
        if (flags && strchr(flags, 's'))
            hold_ignorespace(); /* (HISTCONTROL may have been assigned again) */
        if (flags && strchr(flags, 'h')) {
            free(take_text()); /* (the hook's scratch: see _shournal_histignore_check) */
            text = history_text((size_t)SHOURNAL_MAX_COMMAND_TEXT + 1);
        } else {
            text = take_text();
        }
        int within = g_state == ST_WITHIN;
        int dropped = within && text && flags && strchr(flags, 's') && text[0] == ' ';
        int status = flags && strchr(flags, 'u') ? SHOURNAL_RETURN_VALUE_UNKNOWN
                                                 : atoi(action + 8);
        if (within)
            do_cleanup(dropped ? NULL : (text ? text : ""), status);
        free(text);
        show_listener_warnings();
        g_prepare_due = 1; /* see prepare_if_due() in prepared.c */
        return respond(dropped ? "ok dropped" : "ok");
    }
    errno = ENOENT;
    return -1;
}
