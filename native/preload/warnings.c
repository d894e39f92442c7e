/* Warnings: one short line at most, never a flood; inside a trigger they
 * travel back in its response.  And the lines the listener or the daemon
 * left for the shell's prompt. */
#include "preload.h"

/* One line, only when it differs from the previous one: a broken recorder
 * must not drown the user's terminal. */
void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warn_once(const char *fmt, ...)
{
    char buf[sizeof g_last_warning];
    va_list ap;
    int saved = errno;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strcmp(buf, g_last_warning) != 0) {
        memcpy(g_last_warning, buf, sizeof buf);
        if (g_in_trigger) {
            size_t used = strlen(g_pending);
            snprintf(g_pending + used, sizeof g_pending - used, "shournal: %s\n", buf);
        } else {
            dprintf(STDERR_FILENO, "shournal: %s\n", buf);
        }
    }
    errno = saved;
}

/* Show (once) the first line the listener or the daemon left for us:
 * <rundir>/warnings.<our session in hex> concerns our own command lines
 * and is shown first; <rundir>/warnings (nothing to do with one command
 * line) goes to whichever shell takes it first.  Must match _warn() in
 * shournal/capture/listener.py. */
static void show_warnings_file(const char *name)
{
    char path[PATH_MAX + 64], taken[PATH_MAX + 96], buf[1024];
    struct stat held, named;
    ssize_t n;
    int fd;
    if (!g_rundir[0])
        return;
    snprintf(path, sizeof path, "%s/%s", g_rundir, name);
    fd = real_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    /* A writer holds the lock from before its write until after it: busy
     * means a line is being written (shown at the next prompt); the prompt
     * never waits.  Holding it, the file cannot be taken by another shell
     * (they take the lock first), and a writer who opened it before the
     * rename sees afterwards that it was taken and writes a new one. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &held) != 0 ||
        lstat(path, &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
        close(fd);
        return;
    }
    snprintf(taken, sizeof taken, "%s.%d", path, (int)getpid());
    if (rename(path, taken) != 0) {
        close(fd);
        return;
    }
    n = read(fd, buf, sizeof buf - 1);
    if (n > 0) {
        char *nl;
        buf[n] = '\0';
        nl = strchr(buf, '\n');
        if (nl)
            *nl = '\0';
        if (strcmp(buf, g_last_warning) != 0) {
            size_t used = strlen(g_pending);
            snprintf(g_last_warning, sizeof g_last_warning, "%.250s", buf);
            snprintf(g_pending + used, sizeof g_pending - used, "shournal: %.250s\n", buf);
        }
    }
    unlink(taken);
    close(fd);
}

void show_listener_warnings(void)
{
#define SESSION_WARNINGS SHOURNAL_WARNINGS_FILE "."
    char name[sizeof SESSION_WARNINGS + 2 * sizeof g_session];
    size_t i;
    if (!g_rundir[0])
        return;
    memcpy(name, SESSION_WARNINGS, sizeof SESSION_WARNINGS - 1);
    for (i = 0; i < sizeof g_session; i++)
        snprintf(name + sizeof SESSION_WARNINGS - 1 + 2 * i, 3, "%02x", g_session[i]);
#undef SESSION_WARNINGS
    show_warnings_file(name);
    show_warnings_file(SHOURNAL_WARNINGS_FILE);
}
