/* Wire format between the preload library (or `shournal run`), the setuid
 * helper and the Python listener, the runtime-directory contract and the
 * helper's limits and defaults.  Mirrored in shournal/capture/protocol.py;
 * tests/unit/test_protocol.py compiles tests/native/protocol_layout.c against
 * this header and compares every value and every field's offset, size and
 * signedness with the Python definitions.
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
#define SHOURNAL_MSG_GO 7u     /* shell -> prepared helper: taken, see below */
#define SHOURNAL_MSG_GO_ACK 8u /* prepared helper -> shell: still there */
#define SHOURNAL_MSG_COMMAND_FD 9u /* as COMMAND, the text in an fd: see there */

/* Fixed descriptor numbers handed from helper to listener. */
#define SHOURNAL_FD_SOCKET 3
#define SHOURNAL_FD_EVENTS 4 /* SEQPACKET socket to the holder (relay below) */
/* setup --spare: the control socket of a second namespace, set up by a
 * copy of the helper on that socket (moved onto SHOURNAL_FD_SOCKET there) */
#define SHOURNAL_FD_SPARE 4

/* Flags in shournal_setup_done.flags */
#define SHOURNAL_SETUP_FD_ERROR 1u /* FAN_REPORT_FD_ERROR is active */

/* helper -> shell; carries three fds as SCM_RIGHTS: the namespace's root
 * directory (O_PATH), its ns/mnt (keeps the namespace alive) and the sync
 * socket to the holder (see below) */
struct shournal_setup_done {
    uint32_t type;
    int32_t holder_pid;   /* process pinning the namespace, for `exec` */
    int32_t listener_pid; /* becomes the Python listener */
    uint32_t flags;
};

/* A prepared namespace (setup --prepared IDLE_SECONDS) is set up while the
 * shell still shows its prompt, for the next command line.  The shell takes
 * it by reading SETUP_DONE and sending GO; the helper answers GO_ACK.  A
 * helper that gets EOF (or anything else) before GO, or no GO within
 * IDLE_SECONDS, exits without starting the listener: nothing was recorded,
 * and an idle shell does not hold a fanotify group for long.  A shell that
 * gets no GO_ACK sets up a namespace the usual way. */
struct shournal_go {
    uint32_t type;
    uint32_t reserved;
};

/* helper -> shell; followed by a short human readable reason */
struct shournal_setup_fail {
    uint32_t type;
    uint32_t reserved;
};

/* shell -> listener at the end of a command line; followed by the command
 * text (not NUL terminated, at most SHOURNAL_MAX_COMMAND_LEN bytes).  A
 * longer text travels as COMMAND_FD: the same struct, no text after it, and
 * one fd (SCM_RIGHTS) of a memfd holding the text from offset 0.  The
 * listener keeps at most SHOURNAL_MAX_COMMAND_TEXT bytes of it and marks a
 * longer one as cut (so the sender never needs more than one byte beyond
 * that limit). */
/* return_value when the shell could not tell the command line's status
 * (shournal/query/find.py RETURN_VALUE_UNKNOWN) */
#define SHOURNAL_RETURN_VALUE_UNKNOWN 2147483647
/* Or'ed into a COMMAND's or COMMAND_FD's type: the shell forked nothing
 * while the line ran, so no process but the shell ever held its end of the
 * socket and no close can race the socket's release (the listener's grace
 * after EOF has nothing to wait for). */
#define SHOURNAL_COMMAND_SHELL_ONLY 0x100u

struct shournal_command {
    uint32_t type;
    int32_t return_value;
    int64_t start_ns; /* CLOCK_REALTIME when the namespace was ready */
    int64_t end_ns;   /* CLOCK_REALTIME when the shell saw the prompt */
    uint8_t session[16];
    /* the command line's own, 16 random bytes drawn when it started: the
     * same in its START, its COMMAND and its start file, so that storing
     * the line twice (from its start and its end, or a push sent again)
     * stores it once; all zeros: none (getrandom failed) */
    uint8_t uuid[16];
};

/* shell -> holder over the sync socket (below), once the command line has
 * its namespace and before any of its programs runs: the line's start, so
 * that a line whose end the shell never reports (it execs a program, it is
 * hung up, it dies) is still stored, marked incomplete.  A struct
 * shournal_command of type START (return_value unknown, end_ns 0) and the
 * command text: at most SHOURNAL_MAX_START_TEXT bytes, one byte more marks
 * a longer text as cut (COMMAND at the end carries it whole).  The holder
 * relays it to the listener unchanged, in order with the events: a relay
 * message of type START, no records, this after the header, padded with
 * zeros to a multiple of 8 (the text has no NUL).  Not on the control
 * socket: the helper waiting there (--lazy-listener) would take it for
 * the end of the command line and start the listener next to it. */
#define SHOURNAL_MSG_START 14u
#define SHOURNAL_MAX_START_TEXT (SHOURNAL_MAX_EVENTS_MSG - 64)

/* The same start, kept on disk by the shell before the line runs (zsh: the
 * shell; bash: PS0's command substitution), so that a line whose recorder
 * is killed (holder, helper or forwarder, the store daemon) or a machine
 * that crashes while it runs still leaves it: one file per line in
 * <data dir>/spool/<journal key>/SHOURNAL_STARTS_DIR (the durable spool, mode
 * 0700), named "<listener pid>-<session, 32 hex digits>-<start_ns>", whole
 * or not at all (written to "." + name, then renamed; no fsync: it
 * survives any process being killed, see docs/design.md "On disk").  One
 * frame as in the spool's records file: "SHSP", the payload's length
 * (u32), the CRC-32 of that length's 4 bytes and the payload (u32); the
 * payload is this struct, cwd_len bytes of working directory, then the
 * command text to the frame's end.  Whoever stores the line removes the
 * file; one whose holder and listener are both gone (starttime: field 22
 * of /proc/<pid>/stat, so a reused pid is not taken for them; 0: unknown)
 * is stored from it as incomplete by the store daemon or a listener. */
#define SHOURNAL_STARTS_DIR "starts"
#define SHOURNAL_START_FORMAT 2u /* 1: without uuid (still read) */

struct shournal_start_file {
    uint32_t format; /* SHOURNAL_START_FORMAT */
    int32_t holder_pid;
    int32_t listener_pid; /* the helper, later the forwarder or listener */
    uint32_t cwd_len;
    uint64_t holder_starttime;
    uint64_t listener_starttime;
    int64_t start_ns; /* as in COMMAND */
    uint8_t session[16];
    uint8_t uuid[16]; /* as in COMMAND */
};

/* The relay, holder <-> listener over the socket on SHOURNAL_FD_EVENTS.
 * The fanotify group was made with CAP_SYS_ADMIN, so the kernel opens its
 * event fds without any permission check: they never leave the holder,
 * except the fd of a script candidate (below).  For every event whose file
 * the user may read (checked with the user's ids and groups) the holder
 * sends a record: what fstat says, the path (readlink of the fd), and the
 * partial hash (shournal_hash.h), all taken when the event is read. */
#define SHOURNAL_MSG_EVENTS 4u  /* holder -> listener */
#define SHOURNAL_MSG_FLUSH 5u   /* listener -> holder: forward all queued */
#define SHOURNAL_MSG_FLUSHED 6u /* holder -> listener: done, same seq */

/* At most SCM_MAX_FD (253) descriptors travel in one message. */
#define SHOURNAL_MAX_FDS_PER_MSG 253
/* An EVENTS message is at most this long (records are packed). */
#define SHOURNAL_MAX_EVENTS_MSG (64 * 1024)

/* EVENTS and FLUSHED */
struct shournal_events {
    uint32_t type;
    uint32_t count;     /* records following */
    uint32_t lost;      /* events lost since the last message, all reasons:
                           the sum of the lost_* counters below */
    uint32_t seq;       /* FLUSHED: the seq of the FLUSH answered */
    uint32_t forwarded; /* records sent so far, this message included (mod
                           2^32): the listener checks it received them all */
    uint32_t nfds;      /* fds attached (records with SHOURNAL_REC_FD) */
    uint32_t hash_chunk; /* the partial hash settings the holder uses */
    uint32_t hash_reads; /* (both 0: no hashing) */
    /* `lost` by reason (shournal.capture.record.LOST_REASONS), since the last message */
    uint32_t lost_overflow;   /* the kernel's queue overflowed, or an event
                                 came without an fd (the kernel failed to
                                 open the file for us) */
    uint32_t lost_unreadable; /* the check of an event failed: access,
                                 fstat, readlink or the hash's read */
    uint32_t lost_path;       /* the event's path no longer leads to its
                                 file (renamed, replaced, unlinked since) */
    uint32_t lost_reserved;   /* 0; keeps the header a multiple of 8 */
};

/* The listener stores lost events by reason (shournal/capture/record.py
 * LOST_REASONS): these three, and "relay": the relay ended early or records
 * went missing on the way, which only the listener sees. */

/* flags of a record */
#define SHOURNAL_REC_HASH 1u /* `hash` is set (not for empty files, or off) */
#define SHOURNAL_REC_FD 2u   /* a read of a script candidate: its fd is
                                attached, in record order */

/* followed by path_len bytes of path (no NUL), padded with zeros to a
 * multiple of 8 */
struct shournal_record {
    uint64_t mask; /* FAN_CLOSE_WRITE / FAN_CLOSE_NOWRITE */
    uint64_t size;
    int64_t mtime_ns;
    uint64_t hash;
    uint32_t mode;
    uint32_t uid;
    uint32_t gid;
    int32_t pid;
    uint16_t path_len;
    uint16_t flags;
    uint32_t reserved;
};

/* FLUSH: forward everything queued, then answer FLUSHED with `seq` */
struct shournal_flush {
    uint32_t type;
    uint32_t seq;
};

/* The sync socket, shell <-> holder (the third fd of SETUP_DONE).  Before
 * the next command line starts, the shell sends one byte; the holder reads
 * and hashes every event queued so far and answers with one byte.  So a
 * command line never overwrites a file before the previous one's event
 * for it has been taken (no Python on this path).  The shell also sends
 * START on it (see there). */
#define SHOURNAL_SYNC_TIMEOUT_MS 250

#define SHOURNAL_MAX_COMMAND_LEN (96 * 1024)
#define SHOURNAL_MAX_COMMAND_TEXT (16 * 1024 * 1024)
#define SHOURNAL_MAX_FAIL_LEN 512

/* The per-user store daemon (shournal/capture/daemon.py), over an AF_UNIX
 * SOCK_SEQPACKET socket SHOURNAL_DAEMON_SOCKET in the user's runtime
 * directory (mode 0700; the daemon checks SO_PEERCRED).  The forwarder
 * (native/shournal_forward.c), which shournal-suid execs as the listener,
 * sends FORWARD with the control socket and the relay attached (in that
 * order) and the command line's working directory after the header; the
 * daemon answers SPOOLED once the command line is in its durable spool
 * (or there was nothing to store), after removing the forwarder's markers
 * (named after `pid`).  DRAIN (`shournal query`): store every spooled
 * command, answer DRAINED within `arg` ms, `arg` of the answer = commands
 * still waiting.  STATUS (`shournal doctor`): the answer's text follows
 * the header.  The daemon holds flock on SHOURNAL_DAEMON_LOCK (same
 * directory) and rewrites it (its pid) when it takes it.
 * One daemon per journal: both names carry the journal key (the "%s"),
 * SHOURNAL_KEY_LEN hex digits of the FNV-1a 64 hash of the values of
 * SHOURNAL_DB_URL, XDG_CONFIG_HOME, XDG_DATA_HOME and HOME, each followed
 * by a NUL byte (unset counts as empty): the environment that decides a
 * command line's journal (shournal.journal.resolve_url: the URL, the
 * config file, the data directory; shournal_journal_key() in
 * shournal_forward.h, shournal._paths.journal_key).  The spool is
 * <data dir>/spool/<key> alike. */
#define SHOURNAL_DAEMON_SOCKET "daemon.%s.sock"
#define SHOURNAL_DAEMON_LOCK "daemon.%s.lock"
#define SHOURNAL_KEY_LEN 16
#define SHOURNAL_MSG_FORWARD 9u
#define SHOURNAL_MSG_SPOOLED 10u
#define SHOURNAL_MSG_DRAIN 11u
#define SHOURNAL_MSG_DRAINED 12u
#define SHOURNAL_MSG_STATUS 13u
/* FORWARD's arg: handed over by shournal-suid itself, whose environment
 * the daemon could not read and which the apparatus never uses (the shell
 * then execs shournal-forward: spawn_helper in preload/spawn.c), so
 * the daemon does not look for the apparatus switch there. */
#define SHOURNAL_FORWARD_BY_HELPER 1u

struct shournal_daemon_msg {
    uint32_t type;
    int32_t pid;
    uint32_t arg;
    uint32_t reserved;
};

/* The runtime directory ($XDG_RUNTIME_DIR/shournal, else /tmp/shournal-UID,
 * mode 0700, the user's own).  Per command line, a marker named
 * <listener pid>.<state>: the shell makes it RUN when the command line
 * starts and renames it END when it has ended; the listener (or the store
 * daemon, for its forwarder's pid) renames END to STORE once every event is
 * read, and removes it when stored.  The
 * listener appends to WARNINGS (the shell shows the first line; both hold
 * flock(LOCK_EX) on it: the writer from before its write until after it,
 * the shell while it renames, reads and removes it) and writes
 * SETUP_ARGS: the helper's setup options derived from the config, NUL
 * separated, which the preload library passes on (it cannot read TOML).
 * With the apparatus (shournal.reproduce) it is chosen per command line:
 * SETUP_ARGS.<shell pid> after `shournal apparatus on` in that shell, else
 * SETUP_ARGS_APPARATUS when the working directory is under one of the
 * NUL separated paths in APPARATUS_PATHS, else SETUP_ARGS. */
#define SHOURNAL_MARK_RUN "run"
#define SHOURNAL_MARK_END "end"
#define SHOURNAL_MARK_STORE "store"
#define SHOURNAL_WARNINGS_FILE "warnings"
#define SHOURNAL_SETUP_ARGS_FILE "setup-args"
#define SHOURNAL_SETUP_ARGS_APPARATUS_FILE "setup-args.apparatus"
#define SHOURNAL_APPARATUS_PATHS_FILE "apparatus-paths"

/* The helper's limits: `setup --exclude-mount` at most this many times,
 * `--archive-ext` and `--archive-name` at most SHOURNAL_MAX_ARCHIVE_EXT
 * extensions and basenames together, each of at most SHOURNAL_MAX_EXT_LEN bytes, `--hash CHUNK:READS` within these bounds. */
#define SHOURNAL_MAX_EXCLUDES 64
#define SHOURNAL_MAX_ARCHIVE_EXT 32
#define SHOURNAL_MAX_EXT_LEN 32
#define SHOURNAL_HASH_CHUNK_MIN 8
#define SHOURNAL_HASH_CHUNK_MAX (40 * 1024)
#define SHOURNAL_HASH_READS_MIN 1
#define SHOURNAL_HASH_READS_MAX INT32_MAX

/* Defaults, the same as the config's (setup without options: no config
 * seen yet). */
#define SHOURNAL_DEFAULT_HASH_CHUNK 256
#define SHOURNAL_DEFAULT_HASH_READS 3
#define SHOURNAL_DEFAULT_ARCHIVE_MAX (500 * 1024)

/* The listener's nice value once its command line has ended. */
#define SHOURNAL_LISTENER_NICE 10

#endif
