/* Prints what the compiler makes of native/shournal_protocol.h, for
 * tests/unit/test_protocol.py to compare with shournal/capture/protocol.py:
 *   value NAME N        an integer macro (and the fanotify masks a record
 *                       carries)
 *   string NAME TEXT    a string macro
 *   member STRUCT FIELD OFFSET SIZE SIGNED
 *   sizeof STRUCT N
 * The test checks that every macro and struct of the header is printed and
 * that the members of each struct cover it byte for byte. */
#include <stddef.h>
#include <stdio.h>
#include <sys/fanotify.h>

#include "shournal_protocol.h"

#define VALUE(x) printf("value " #x " %lld\n", (long long)(x))
#define STRING(x) printf("string " #x " %s\n", x)
#define SIGNED(t) ((t)-1 < (t)1)
#define MEMBER(s, f)                                                                         \
    printf("member " #s " " #f " %zu %zu %d\n", offsetof(struct s, f),                      \
           sizeof(((struct s *)0)->f), SIGNED(__typeof__(((struct s *)0)->f)))
/* an array member: the signedness of its elements */
#define ARRAY(s, f)                                                                          \
    printf("member " #s " " #f " %zu %zu %d\n", offsetof(struct s, f),                      \
           sizeof(((struct s *)0)->f), SIGNED(__typeof__(((struct s *)0)->f[0])))
#define SIZEOF(s) printf("sizeof " #s " %zu\n", sizeof(struct s))

int main(void)
{
    VALUE(SHOURNAL_MSG_SETUP_DONE);
    VALUE(SHOURNAL_MSG_SETUP_FAIL);
    VALUE(SHOURNAL_MSG_COMMAND);
    VALUE(SHOURNAL_MSG_EVENTS);
    VALUE(SHOURNAL_MSG_FLUSH);
    VALUE(SHOURNAL_MSG_FLUSHED);
    VALUE(SHOURNAL_MSG_GO);
    VALUE(SHOURNAL_MSG_GO_ACK);
    VALUE(SHOURNAL_MSG_COMMAND_FD);
    VALUE(SHOURNAL_MSG_FORWARD);
    VALUE(SHOURNAL_MSG_SPOOLED);
    VALUE(SHOURNAL_MSG_DRAIN);
    VALUE(SHOURNAL_MSG_DRAINED);
    VALUE(SHOURNAL_MSG_STATUS);
    VALUE(SHOURNAL_FORWARD_BY_HELPER);
    VALUE(SHOURNAL_MSG_START);
    VALUE(SHOURNAL_MAX_START_TEXT);
    VALUE(SHOURNAL_RETURN_VALUE_UNKNOWN);
    VALUE(SHOURNAL_COMMAND_SHELL_ONLY);
    VALUE(SHOURNAL_FD_SOCKET);
    VALUE(SHOURNAL_FD_EVENTS);
    VALUE(SHOURNAL_FD_SPARE);
    VALUE(SHOURNAL_SETUP_FD_ERROR);
    VALUE(SHOURNAL_MAX_FDS_PER_MSG);
    VALUE(SHOURNAL_MAX_EVENTS_MSG);
    VALUE(SHOURNAL_REC_HASH);
    VALUE(SHOURNAL_REC_FD);
    VALUE(FAN_CLOSE_WRITE);
    VALUE(FAN_CLOSE_NOWRITE);
    VALUE(SHOURNAL_SYNC_TIMEOUT_MS);
    VALUE(SHOURNAL_MAX_COMMAND_LEN);
    VALUE(SHOURNAL_MAX_COMMAND_TEXT);
    VALUE(SHOURNAL_MAX_FAIL_LEN);
    VALUE(SHOURNAL_MAX_EXCLUDES);
    VALUE(SHOURNAL_MAX_ARCHIVE_EXT);
    VALUE(SHOURNAL_MAX_EXT_LEN);
    VALUE(SHOURNAL_HASH_CHUNK_MIN);
    VALUE(SHOURNAL_HASH_CHUNK_MAX);
    VALUE(SHOURNAL_HASH_READS_MIN);
    VALUE(SHOURNAL_HASH_READS_MAX);
    VALUE(SHOURNAL_DEFAULT_HASH_CHUNK);
    VALUE(SHOURNAL_DEFAULT_HASH_READS);
    VALUE(SHOURNAL_DEFAULT_ARCHIVE_MAX);
    VALUE(SHOURNAL_LISTENER_NICE);
    STRING(SHOURNAL_MARK_RUN);
    STRING(SHOURNAL_MARK_END);
    STRING(SHOURNAL_MARK_STORE);
    STRING(SHOURNAL_WARNINGS_FILE);
    STRING(SHOURNAL_SETUP_ARGS_FILE);
    STRING(SHOURNAL_SETUP_ARGS_APPARATUS_FILE);
    STRING(SHOURNAL_APPARATUS_PATHS_FILE);
    STRING(SHOURNAL_DAEMON_SOCKET);
    STRING(SHOURNAL_DAEMON_LOCK);
    VALUE(SHOURNAL_KEY_LEN);
    STRING(SHOURNAL_STARTS_DIR);
    VALUE(SHOURNAL_START_FORMAT);

    SIZEOF(shournal_setup_done);
    MEMBER(shournal_setup_done, type);
    MEMBER(shournal_setup_done, holder_pid);
    MEMBER(shournal_setup_done, listener_pid);
    MEMBER(shournal_setup_done, flags);

    SIZEOF(shournal_go);
    MEMBER(shournal_go, type);
    MEMBER(shournal_go, reserved);

    SIZEOF(shournal_setup_fail);
    MEMBER(shournal_setup_fail, type);
    MEMBER(shournal_setup_fail, reserved);

    SIZEOF(shournal_command);
    MEMBER(shournal_command, type);
    MEMBER(shournal_command, return_value);
    MEMBER(shournal_command, start_ns);
    MEMBER(shournal_command, end_ns);
    ARRAY(shournal_command, session);
    ARRAY(shournal_command, uuid);

    SIZEOF(shournal_events);
    MEMBER(shournal_events, type);
    MEMBER(shournal_events, count);
    MEMBER(shournal_events, lost);
    MEMBER(shournal_events, seq);
    MEMBER(shournal_events, forwarded);
    MEMBER(shournal_events, nfds);
    MEMBER(shournal_events, hash_chunk);
    MEMBER(shournal_events, hash_reads);
    MEMBER(shournal_events, lost_overflow);
    MEMBER(shournal_events, lost_unreadable);
    MEMBER(shournal_events, lost_path);
    MEMBER(shournal_events, lost_reserved);

    SIZEOF(shournal_record);
    MEMBER(shournal_record, mask);
    MEMBER(shournal_record, size);
    MEMBER(shournal_record, mtime_ns);
    MEMBER(shournal_record, hash);
    MEMBER(shournal_record, mode);
    MEMBER(shournal_record, uid);
    MEMBER(shournal_record, gid);
    MEMBER(shournal_record, pid);
    MEMBER(shournal_record, path_len);
    MEMBER(shournal_record, flags);
    MEMBER(shournal_record, reserved);

    SIZEOF(shournal_flush);
    MEMBER(shournal_flush, type);
    MEMBER(shournal_flush, seq);

    SIZEOF(shournal_daemon_msg);
    MEMBER(shournal_daemon_msg, type);
    MEMBER(shournal_daemon_msg, pid);
    MEMBER(shournal_daemon_msg, arg);
    MEMBER(shournal_daemon_msg, reserved);

    SIZEOF(shournal_start_file);
    MEMBER(shournal_start_file, format);
    MEMBER(shournal_start_file, holder_pid);
    MEMBER(shournal_start_file, listener_pid);
    MEMBER(shournal_start_file, cwd_len);
    MEMBER(shournal_start_file, holder_starttime);
    MEMBER(shournal_start_file, listener_starttime);
    MEMBER(shournal_start_file, start_ns);
    ARRAY(shournal_start_file, session);
    ARRAY(shournal_start_file, uuid);
    return 0;
}
