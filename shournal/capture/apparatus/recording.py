"""Recording a command with its apparatus (the listener's side).

`shournal run --apparatus` sets up the namespace with every read carrying
its fd (config.helper_options(apparatus=True): no ``--writable-reads``,
any extension, up to ``[apparatus] max_file_size``) and tells the listener
through ``SHOURNAL_APPARATUS`` in the helper's environment (never the
command's).  The listener's one hook, :func:`shournal.capture.apparatus.collector`, then returns an
:class:`ApparatusCollector`: the ordinary record is made exactly as
without it, and beside it

* every file the process tree read (data, configs, scripts, programs,
  libraries, modules), with its content archived from the fd the holder
  sent -- the content that was read, checked against the holder's partial
  hash, never re-read by path;
* the full-content digest of every file written, read back by path once
  the command has ended (written files come without an fd); with
  ``archive_outputs`` their content too;
* the environment with its secrets replaced by ``[REDACTED]`` (the rules of
  shournal.redact, counted in the manifest's ``redacted``), umask,
  uid/gid/groups, host name, kernel release;
* what was not archived, counted by reason.

The manifest reaches the store with the command (CommandRecord.apparatus,
table ``apparatus``).
"""

from __future__ import annotations

import json
import os
import socket
import stat
from typing import Any

import xxhash

from shournal import _paths, redact
from shournal.capture.apparatus import ENV_VAR, summary_path
from shournal.capture.collector import Collector, read_all
from shournal.hashing import CONTENT_DIGEST_ALGORITHM, content_digest
from shournal.store.archive import (
    MANIFEST_FORMAT,
    Archive,
    ArchiveError,
    encode_manifest,
    redact_argv,
)

# Reasons a read or written file's content is not in the archive.
TOO_LARGE = "too_large"  # beyond [apparatus] max_file_size
COMMAND_CAP = "command_cap"  # beyond [apparatus] max_command_size
CHANGED = "changed"  # modified between the event and our read
NOT_REGULAR = "not_regular"  # a device, a pipe: no content to keep
UNREADABLE = "unreadable"  # no fd arrived, or reading failed
ARCHIVE_ERROR = "archive_error"  # the archive could not be written
_OUTPUT_BLOCK = 1 << 20


def apparatus_collector(cfg: Any, uid: int, gids: frozenset[int],
                        shell: dict[str, Any] | None = None) -> ApparatusCollector:
    """``shell``: a shell's command line recorded with its apparatus
    (shournal.capture.apparatus.shell_apparatus), not `shournal run --apparatus`."""
    if shell is not None:
        return ApparatusCollector(cfg, uid, gids, shell)
    spec = os.environ.pop(ENV_VAR, "")
    try:
        extra = json.loads(spec)
        if not isinstance(extra, dict):
            raise ValueError
    except ValueError:
        extra = {}
    return ApparatusCollector(cfg, uid, gids, extra)


class ApparatusCollector(Collector):
    def __init__(self, cfg: Any, uid: int, gids: frozenset[int], extra: dict[str, Any]) -> None:
        super().__init__(cfg, uid, gids)
        self.app_cfg = cfg.apparatus
        if extra.get("archive_outputs") is True:
            self.app_cfg = self.app_cfg._replace(archive_outputs=True)
        self.archive = Archive()
        self.extra = extra
        origin = extra.get("derived_from")
        # `shournal rerun --in-place`: the command it derives from (the
        # listener's build_record stores it beside the manifest).
        self.derived_from = origin if type(origin) is int and origin > 0 else None
        env = extra.get("env")
        env = dict(os.environ) if not isinstance(env, dict) else env
        env.pop("SHOURNAL_CWD", None)
        self.env = env
        # path -> [size, mtime_ns, mode, partial hash, digest hex | None, reason | None]
        self.app_reads: dict[bytes, list[Any]] = {}
        self.app_writes: dict[bytes, list[Any]] = {}
        self.added = 0  # new archive bytes of this command
        self.content_bytes = 0  # bytes of content archived or found archived
        self.not_archived: dict[str, int] = {}
        self.redacted: dict[str, int] = {}  # environment values hidden, by kind
        self._manifest: bytes | None = None
        self._hold: int | None = None  # the archive's lock, held shared

    # -- while events arrive -------------------------------------------------

    def _read(self, path, size, mtime, mode, owner, group, hsh, fd) -> None:
        super()._read(path, size, mtime, mode, owner, group, hsh, fd)
        if not self.may_read(mode, owner, group, self.uid, self.gids):
            return
        known = self.app_reads.get(path)
        if known is not None and known[:4] == [size, mtime, mode, hsh] and known[4]:
            return
        digest, why = None, None
        if not stat.S_ISREG(mode):
            why = NOT_REGULAR
        elif fd < 0:
            why = TOO_LARGE if size > self.app_cfg.max_file_size else UNREADABLE
        else:
            data = self._content(fd, size, hsh)
            if data is None:
                why = CHANGED
            else:
                digest, why = self._keep(data)
        self.app_reads[path] = [size, mtime, mode, hsh, digest, why]

    def _write(self, path, size, mtime, mode, owner, group, hsh) -> None:
        super()._write(path, size, mtime, mode, owner, group, hsh)
        self.app_writes[path] = [size, mtime, mode, hsh, None, None]

    def _keep(self, data: bytes) -> tuple[str | None, str | None]:
        """Archive ``data`` within the command's cap: (digest, reason it
        was not archived)."""
        digest = content_digest(data).hex()
        if self._hold is None:
            # Until this listener exits (its record stored or spooled), no
            # collection removes a blob this manifest is about to name.
            self._hold = self.archive.hold_for_recording()
        try:
            if not self.archive.has(digest):
                if self.added + len(data) > self.app_cfg.max_command_size:
                    return None, COMMAND_CAP
                self.added += self.archive.put(data, digest)[1]
        except ArchiveError:
            return None, ARCHIVE_ERROR
        self.content_bytes += len(data)
        return digest, None

    # -- once the command has ended -----------------------------------------

    def _output(self, path: bytes, entry: list[Any]) -> None:
        """Digest (and with archive_outputs, archive) a written file, read
        back by path: written files come without an fd.  If it is no
        longer the file the event described, say so."""
        size, mtime = entry[0], entry[1]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            entry[5] = UNREADABLE
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                entry[5] = NOT_REGULAR
                return
            if st.st_size != size or st.st_mtime_ns != mtime:
                entry[5] = CHANGED
                return
            keep = self.app_cfg.archive_outputs and size <= self.app_cfg.max_file_size
            if keep:
                data = read_all(fd, size)
                if data is None:
                    entry[5] = CHANGED
                    return
                entry[4], entry[5] = self._keep(data)
                if entry[4] is None:  # not archived: still digest it
                    entry[4] = content_digest(data).hex()
                return
            h = xxhash.xxh3_128()
            off = 0
            while off < size:
                block = os.pread(fd, min(_OUTPUT_BLOCK, size - off), off)
                if not block:
                    break
                h.update(block)
                off += len(block)
            if off != size:
                entry[5] = CHANGED
                return
            entry[4] = h.hexdigest()
            if self.app_cfg.archive_outputs:
                entry[5] = TOO_LARGE
        except OSError:
            entry[5] = UNREADABLE
        finally:
            os.close(fd)

    @property
    def manifest(self) -> bytes:
        """The encoded manifest (computed once, after the command)."""
        if self._manifest is None:
            self._manifest = encode_manifest(self._build())
            self._summarise()
        return self._manifest

    def _build(self) -> dict[str, Any]:
        self.settle()
        for path, entry in self.app_writes.items():
            self._output(path, entry)
        for entry in (*self.app_reads.values(), *self.app_writes.values()):
            why = entry[5]
            # (a device or pipe has no content to lose)
            if why is not None and why != NOT_REGULAR:
                self.not_archived[why] = self.not_archived.get(why, 0) + 1
        env, self.redacted = redact.redact_env(
            self.env, self.app_cfg.secret_env_names, self.redact_patterns
        )
        uname = os.uname()
        umask = self.extra.get("umask")
        argv, found = redact_argv(self.extra.get("argv"), self.redact_patterns)
        redact.add_counts(self.redacted, found)
        return {
            "format": MANIFEST_FORMAT,
            "digest_algorithm": CONTENT_DIGEST_ALGORITHM,
            "argv": argv if isinstance(argv, list) else None,
            "env": env,
            "redacted": self.redacted,
            "umask": umask if isinstance(umask, int) else None,
            "uid": os.getuid(),
            "gid": os.getgid(),
            "groups": sorted(self.gids),
            "hostname": socket.gethostname(),
            "kernel": uname.release,
            "machine": uname.machine,
            "archive_outputs": self.app_cfg.archive_outputs,
            "derived_from": self.derived_from,
            "reads": [[os.fsdecode(p), *e] for p, e in sorted(self.app_reads.items())],
            "writes": [[os.fsdecode(p), *e] for p, e in sorted(self.app_writes.items())],
            "not_archived": dict(sorted(self.not_archived.items())),
            "archived_bytes_added": self.added,
            "content_bytes": self.content_bytes,
        }

    def _summarise(self) -> None:
        archived = sum(1 for e in self.app_reads.values() if e[4] is not None and e[5] is None)
        line = (f"apparatus: {archived} of {len(self.app_reads)} read files archived "
                f"({self.added} new bytes), {len(self.app_writes)} written files digested")
        if self.not_archived:
            line += "; not archived: " + ", ".join(
                f"{n} {why.replace('_', ' ')}" for why, n in sorted(self.not_archived.items()))
        if self.redacted:
            line += "; environment: " + redact.describe_counts(self.redacted)
        try:
            _paths.make_private_dir(_paths.runtime_dir())
            with open(_paths.open_private(summary_path(os.getpid())), "w",
                      encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError:
            pass


