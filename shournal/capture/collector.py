"""The listener's policy over the holder's records: which file events a
command line keeps (the config's rules, the caps with counted drops, the
permission test) and the archived contents of scripts it read.  Used by
the store daemon and the standalone listener alike, and extended by the
apparatus recorder (shournal.capture.apparatus.recording)."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, NamedTuple

from shournal import _paths, limits, redact
from shournal.capture import protocol
from shournal.record import FileEvent

# While the command runs, messages are only received and kept; filtering
# and building events waits until it has ended, so Python takes (almost) no
# CPU while the user's command runs (on 2 cores it would compete with it).
# These bound what is kept: past them, the pending messages are handled at
# once.
_PENDING_BYTES = 16 << 20
_PENDING_FDS = 512


class Rules(NamedTuple):
    """A config's rules for a command line (shournal.capture.filters)."""

    write: Any  # PathRule
    read: Any  # PathRule
    archive: Any  # ScriptArchiveRule
    ignore: Any  # IgnoredCommands


# The store daemon handles every command line with the same config object
# (a new one when the file changed): its rules are built once per config,
# not per line.
_rules: tuple[object, Rules] | None = None


def rules_of(cfg) -> Rules:
    global _rules
    from shournal.capture import filters

    if _rules is None or _rules[0] is not cfg:
        _rules = (cfg, Rules(
            filters.PathRule.from_config(cfg.write_events),
            filters.PathRule.from_config(cfg.read_events),
            filters.ScriptArchiveRule.from_config(cfg.script_archive),
            filters.IgnoredCommands.from_config(cfg.ignore_commands),
        ))
    return _rules[1]


@functools.cache
def _own_dirs(_runtime: str | None, _data: str | None, _home: str | None) -> tuple[bytes, bytes]:
    """shournal's own in-flight files (a nested recorded shell's markers,
    listener warnings, and the starts of its lines: spool.STARTS) are never
    a command's.  Keyed by the environment they are found from."""
    from shournal.capture.spool import starts_dir

    return (
        os.fsencode(_paths.runtime_dir()).rstrip(b"/") + b"/",
        os.fsencode(os.path.realpath(starts_dir())) + b"/",
    )


class Collector:
    """Turns the holder's records into FileEvents, applying the config's
    rules.  The holder already took fstat, path and partial hash when it
    read each event; what is left here is policy."""

    def __init__(self, cfg, uid: int, gids: frozenset[int]) -> None:
        from shournal.capture import filters

        self.uid = uid
        self.gids = gids
        self.writes: dict[bytes, FileEvent] = {}
        self.reads: dict[bytes, FileEvent] = {}
        self.received = 0  # records, to check against the holder's count
        self.dropped_writes = 0
        self.dropped_reads = 0
        # lost events by reason (shournal.record.LOST_REASONS)
        self.lost: dict[str, int] = {}
        self.archived = 0
        # Secrets replaced in archived scripts (shournal.redact), by kind.
        self.redactions: dict[str, int] = {}
        self._user_patterns = cfg.redact.patterns
        rules = rules_of(cfg)
        self.write_rule, self.read_rule, self.archive_rule = rules.write, rules.read, rules.archive
        self.may_read = filters.may_read_ids
        self.may_write = filters.may_write_ids
        # What the holder hashed with (it says so in every message); the
        # config's until the first message.
        self.hash_settings: tuple[int, int] | None = (
            (cfg.hash.chunk_size, cfg.hash.max_count_of_reads) if cfg.hash.enable else None
        )
        self.max_w = cfg.write_events.max_event_count or sys.maxsize
        self.max_r = cfg.read_events.max_event_count or sys.maxsize
        self.read_enabled = cfg.read_events.enable
        self.read_only_writable = cfg.read_events.only_writable
        self.own_dirs = _own_dirs(
            os.environ.get("XDG_RUNTIME_DIR"), os.environ.get("XDG_DATA_HOME"),
            os.environ.get("HOME"),
        )
        self._pending: list[tuple[bytes, int, list[int]]] = []
        self._pending_bytes = 0
        self._pending_fds = 0
        # The shell's START (through the holder): what is stored when the
        # shell never reports the line's end.
        self.start: protocol.CommandMessage | None = None
        # When the line's last process exited (listener.listen()).
        self.eof_ns = 0
        # The relay ended early and no command was known to name in the
        # warning yet (listener.collect() says it once the start is found
        # on disk).
        self.relay_unreported = False

    @property
    def redact_patterns(self) -> tuple[redact.Pattern, ...]:
        """The config's secret patterns, compiled when first needed (a
        listener process that archives nothing compiles none)."""
        return redact.patterns_for(self._user_patterns)

    def lose(self, reason: str, n: int = 1) -> None:
        if n > 0:
            self.lost[reason] = self.lost.get(reason, 0) + n

    def take(self, data: bytes, count: int, fds: list[int]) -> None:
        """Keep one message of records for settle() (order matters: a later
        record of a path replaces an earlier one, and caps count in order)."""
        self._pending.append((data, count, fds))
        self._pending_bytes += len(data)
        self._pending_fds += len(fds)
        if self._pending_bytes > _PENDING_BYTES or self._pending_fds > _PENDING_FDS:
            self.settle()

    def settle(self) -> None:
        """Handle every kept message."""
        pending, self._pending = self._pending, []
        self._pending_bytes = self._pending_fds = 0
        for i, (data, count, fds) in enumerate(pending):
            try:
                self.handle_records(data, count, fds)
            except BaseException:
                for _, _, rest in pending[i + 1 :]:
                    for fd in rest:
                        os.close(fd)
                raise

    def handle_records(self, data: bytes, count: int, fds: list[int]) -> None:
        unpack = protocol.RECORD.unpack_from
        rsize = protocol.RECORD.size
        end = len(data)
        off = 0
        fdi = 0
        try:
            for _ in range(count):
                if end - off < rsize:
                    return  # cannot happen; Relay.missing() counts the rest
                mask, size, mtime, hsh, mode, owner, group, _pid, plen, flags, _ = unpack(
                    data, off
                )
                start = off + rsize
                path = data[start : start + plen]
                off = start + ((plen + 7) & ~7)
                self.received += 1
                fd = -1
                if flags & protocol.REC_FD:
                    if fdi < len(fds):
                        fd = fds[fdi]
                    fdi += 1
                if not flags & protocol.REC_HASH:
                    hsh = None
                if mask & protocol.FAN_CLOSE_WRITE:
                    self._write(path, size, mtime, mode, owner, group, hsh)
                if mask & protocol.FAN_CLOSE_NOWRITE:
                    self._read(path, size, mtime, mode, owner, group, hsh, fd)
        finally:
            for fd in fds:
                os.close(fd)

    def _write(self, path, size, mtime, mode, owner, group, hsh) -> None:
        if path.startswith(self.own_dirs):
            return
        if not self.may_write(mode, owner, group, self.uid, self.gids):
            return
        if not self.write_rule.match(path):
            return
        if path not in self.writes and len(self.writes) >= self.max_w:
            self.dropped_writes += 1
            return
        self.writes[path] = FileEvent(path, size, mtime, mode, hsh)

    def _read(self, path, size, mtime, mode, owner, group, hsh, fd) -> None:
        uid, gids = self.uid, self.gids
        if path.startswith(self.own_dirs):
            return
        if not self.may_read(mode, owner, group, uid, gids):
            return
        writable = None
        general = False
        if self.read_enabled and self.read_rule.match(path):
            if self.read_only_writable:
                writable = self.may_write(mode, owner, group, uid, gids)
                general = writable
            else:
                general = True
        archive = False
        rule = self.archive_rule
        if (
            fd >= 0
            and rule.enable
            and self.archived < rule.max_count_of_files
            and rule.match(path, size)
        ):
            if rule.only_writable:
                if writable is None:
                    writable = self.may_write(mode, owner, group, uid, gids)
                archive = writable
            else:
                archive = True
        if not general and not archive:
            return
        known = self.reads.get(path)
        if known is None and len(self.reads) >= self.max_r:
            self.dropped_reads += 1
            return
        content = None
        if archive and (known is None or known.content is None):
            content = self._content(fd, size, hsh)
            if content is not None:
                self.archived += 1
                # The script archive keeps no secret (the apparatus's
                # archive, byte-exact for a replay, reads _content itself).
                content, found = redact.redact_bytes(content, self.redact_patterns)
                redact.add_counts(self.redactions, found)
        elif known is not None:
            content = known.content
        self.reads[path] = FileEvent(path, size, mtime, mode, hsh, content)

    def _content(self, fd: int, size: int, hsh: int | None) -> bytes | None:
        """The script as the command read it, or None if it has changed
        since the holder hashed it (a later command line rewrote it)."""
        try:
            data = read_all(fd, size)
        except OSError:
            return None
        if data is None:
            return None
        if hsh is not None:
            from shournal.hashing import partial_xxh64_bytes

            chunk, reads = self.hash_settings or (
                limits.DEFAULT_HASH_CHUNK,
                limits.DEFAULT_HASH_READS,
            )
            if partial_xxh64_bytes(data, chunk, reads) != hsh:
                return None
        return data


def read_all(fd: int, size: int) -> bytes | None:
    parts, off = [], 0
    while off < size:
        block = os.pread(fd, size - off, off)
        if not block:
            break
        parts.append(block)
        off += len(block)
    data = b"".join(parts)
    return data if len(data) == size else None
