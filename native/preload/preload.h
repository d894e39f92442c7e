/* libshournal_preload.so: loaded into the interactive bash or zsh only.
 *
 * The shell integration talks to it by opening magic paths
 * ("_///shournal///_/<action>"), which costs no fork.  When a command line
 * starts, the library asks the setuid helper for a fresh mount namespace
 * whose mounts are fanotify-marked.  While the command line runs:
 *   - the shell's own opens (redirections, `source`) go through a directory
 *     fd of the namespace's root, so they are observed;
 *   - every program a forked child executes enters the namespace through
 *     the helper's exec trampoline;
 *   - every process holds a copy of the control socket, so the listener sees
 *     EOF only when the last process of the command line has exited.
 *
 * Nothing here may break the shell: every failure falls back to the real
 * libc call and at most one short warning.
 *
 * One file per section, all compiled into the one library:
 *   core.c      the shell's state, the real libc functions, small helpers
 *   warnings.c  one-line warnings; those the listener left for the prompt
 *   settings.c  the runtime directory and the helper options (setup-args)
 *   spawn.c     starting the setuid helper detached, and its answer
 *   daemon.c    the relay to the store daemon: started when none answers
 *   prepared.c  namespaces prepared at the prompt for the next lines
 *   start.c     a command line's start record: on disk and to the holder
 *   bash.c      bash's history and variables, read in-process
 *   line.c      a command line's start and end
 *   triggers.c  the actions the shell integration asks for
 *   wrappers.c  the wrapped libc functions: the library's only exports
 *
 * This header is internal.  Everything it declares is hidden: the library
 * exports the wrappers (EXPORT) and nothing else, which
 * `make check-exports` holds to libshournal_preload.exports.
 */
#ifndef SHOURNAL_PRELOAD_H
#define SHOURNAL_PRELOAD_H

#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "../shournal_fdpass.h"
#include "../shournal_forward.h"
#include "../shournal_protocol.h"

#ifndef SHOURNAL_SUID_PATH
#define SHOURNAL_SUID_PATH "/usr/local/libexec/shournal/shournal-suid"
#endif
#ifndef SHOURNAL_LISTENER_PATH
#define SHOURNAL_LISTENER_PATH "/usr/local/libexec/shournal/shournal-listener"
#endif

/* flags, --hash, --archive-max-size, excludes, extensions and names with values */
#define SETUP_MAX_OPTS (4 + 2 + 2 + 2 * SHOURNAL_MAX_EXCLUDES + 2 * SHOURNAL_MAX_ARCHIVE_EXT)
#define SETUP_ARGS_MAX 16384

#define EXPORT __attribute__((visibility("default")))

/* Declarations as well as definitions: the sections reach each other's
 * functions and state directly, never through the PLT or the GOT. */
#pragma GCC visibility push(hidden)

/* ------------------------------------------------ core.c: the state */

enum state { ST_DISABLED, ST_IDLE, ST_WITHIN };

extern enum state g_state;
extern pid_t g_shell_pid;
extern int g_sock, g_rootfd, g_nsfd, g_syncfd;
extern int g_prev_sync;
extern pid_t g_holder, g_listener;
extern int g_forked;
extern int64_t g_start_ns;
extern uint8_t g_session[16];
extern uint8_t g_uuid[16];
extern char g_seq[32];
extern char g_suid[PATH_MAX];
extern char g_listener_path[PATH_MAX];
extern char g_rundir[PATH_MAX];
extern char g_last_warning[256];
extern int g_in_trigger;
extern char g_pending[512];
extern int g_textfd;
extern int g_text_is_history;

extern int (*real_open)(const char *, int, ...);
extern int (*real_open64)(const char *, int, ...);
extern int (*real_openat)(int, const char *, int, ...);
extern int (*real_openat64)(int, const char *, int, ...);
extern pid_t (*real_fork)(void);
extern int (*real_execve)(const char *, char *const[], char *const[]);
extern ssize_t (*real_getrandom)(void *, size_t, unsigned int);
extern ssize_t (*real_read)(int, void *, size_t);
extern int (*real_poll)(struct pollfd *, nfds_t, int);
extern int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
extern int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                           const sigset_t *);

void resolve(void);
int64_t now_ns(void);
int is_shell(void);
int move_high(int fd, int below, int cloexec);
int wait_readable(int fd, int ms);
char *proc_stat_fields(pid_t pid, char *buf, size_t size);
int process_lives(pid_t pid);

/* ---------------------------------------------------------- warnings.c */

void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void show_listener_warnings(void);

/* ---------------------------------------------------------- settings.c */

extern int g_args_apparatus;
extern char g_apparatus_env[];

int setup_args_from_config(char *buf, char **out, int max);
void args_file_state(struct stat *st);
void setup_rundir(void);

/* ------------------------------------------------------------- spawn.c */

int spawn_detached(const char *path, char *const argv[], char *const envp[], int sock,
                   int spare);
char **child_env(char *first);
int start_helper(int prepared, int *spare, char *why, size_t whylen);
int recv_setup(int sock, struct shournal_setup_done *done, int *rootfd, int *nsfd,
               int *syncfd, char *why, size_t whylen);

/* ------------------------------------------------------------ daemon.c */

int uses_daemon(void);
void ensure_daemon(void);

/* ---------------------------------------------------------- prepared.c */

extern int g_mounts_fd;
extern int g_prepare_due;

void prepare_next(void);
void prepare_if_typed_ahead(void);
void prepare_if_due(void);
void drop_next(void);
int take_next_go(struct shournal_setup_done *done, int *rootfd, int *nsfd, int *syncfd);
int take_next_ack(int sock, int rootfd, int nsfd, int syncfd);

/* ------------------------------------------------------------- start.c */

void setup_starts(void);
int start_file_left(void);
int start_file_of(long pid);
void send_start(const char *text);

/* -------------------------------------------------------------- bash.c */

int bash_api(void);
int hold_ignorespace(void);
char *history_text(size_t max);
void send_start_from_history(void);

/* -------------------------------------------------------------- line.c */

void do_prepare(void);
int start_if_new_seq(void);
char *take_text(void);
void do_cleanup(const char *text, int retval);

/* ---------------------------------------------------------- triggers.c */

int handle_trigger(const char *action);

#pragma GCC visibility pop

#endif
