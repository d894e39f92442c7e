/* Wire format between the preload library (or `shournal run`), the setuid
 * helper and the Python listener.  Mirrored in shournal/protocol.py; a test
 * compiles this header and compares sizes and values.
 *
 * All messages travel over one AF_UNIX SOCK_SEQPACKET socketpair, so every
 * send is one message.  The shell keeps one end (inherited by every observed
 * process), the helper and then the listener keep the other: EOF at the
 * listener means every process of the command line has exited. */
#ifndef SHOURNAL_PROTOCOL_H
#define SHOURNAL_PROTOCOL_H

#include <stdint.h>

#define SHOURNAL_MSG_SETUP_DONE 1u
#define SHOURNAL_MSG_SETUP_FAIL 2u
#define SHOURNAL_MSG_COMMAND 3u

/* Fixed descriptor numbers handed from helper to listener. */
#define SHOURNAL_FD_SOCKET 3
#define SHOURNAL_FD_EVENTS 4 /* SEQPACKET socket to the holder (relay below) */

/* Flags in shournal_setup_done.flags */
#define SHOURNAL_SETUP_FD_ERROR 1u /* FAN_REPORT_FD_ERROR is active */

/* helper -> shell; carries two fds as SCM_RIGHTS: the namespace's root
 * directory (O_PATH) and its ns/mnt (keeps the namespace alive) */
struct shournal_setup_done {
    uint32_t type;
    int32_t holder_pid;   /* process pinning the namespace, for `exec` */
    int32_t listener_pid; /* becomes the Python listener */
    uint32_t flags;
};

/* helper -> shell; followed by a short human readable reason */
struct shournal_setup_fail {
    uint32_t type;
    uint32_t reserved;
};

/* shell -> listener at the end of a command line; followed by the command
 * text (not NUL terminated, at most SHOURNAL_MAX_COMMAND_LEN bytes) */
struct shournal_command {
    uint32_t type;
    int32_t return_value;
    int64_t start_ns; /* CLOCK_REALTIME when the namespace was ready */
    int64_t end_ns;   /* CLOCK_REALTIME when the shell saw the prompt */
    uint8_t session[16];
};

/* The relay, holder <-> listener over the socket on SHOURNAL_FD_EVENTS.
 * The fanotify group was made with CAP_SYS_ADMIN, so the kernel opens its
 * event fds without any permission check: it never leaves the holder.  The
 * holder forwards only events whose file the user may read (checked with
 * the user's ids and groups), each fd as SCM_RIGHTS in event order. */
#define SHOURNAL_MSG_EVENTS 4u  /* holder -> listener */
#define SHOURNAL_MSG_FLUSH 5u   /* listener -> holder: forward all queued */
#define SHOURNAL_MSG_FLUSHED 6u /* holder -> listener: done, same seq */

/* At most SCM_MAX_FD (253) descriptors travel in one message. */
#define SHOURNAL_MAX_EVENTS_PER_MSG 253

/* EVENTS and FLUSHED (count 0) */
struct shournal_events {
    uint32_t type;
    uint32_t count; /* records following, one fd each */
    uint32_t lost;  /* queue overflows and fds the kernel failed to open */
    uint32_t seq;   /* FLUSHED: the seq of the FLUSH answered */
};

struct shournal_event {
    uint64_t mask; /* FAN_CLOSE_WRITE / FAN_CLOSE_NOWRITE */
    int32_t pid;
    uint32_t reserved;
};

/* FLUSH: forward everything queued, then answer FLUSHED with `seq` */
struct shournal_flush {
    uint32_t type;
    uint32_t seq;
};

#define SHOURNAL_MAX_COMMAND_LEN (96 * 1024)
#define SHOURNAL_MAX_FAIL_LEN 512

#endif
