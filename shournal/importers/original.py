"""The database of the original shournal (2.x and 3.x, scheme versions up
to 3.2): ``~/.local/share/shournal/database.db`` and the scripts it stored
beside it (``readFiles/<read file id>``).

Every command comes with its written and read files (path, size, mtime,
partial hash and its settings; read files with their mode and, where
stored, their content), its session and its host and user, so a user of the
original keeps the provenance of the years before.  Facts of its format
(docs/design.md cites the reference): times and mtimes are local time
without a zone (read in this machine's zone); hashes are 8-byte
little-endian blobs, empty or NULL for none; ``returnVal`` 2^31-1 means
unknown (as here); scheme versions before 2.4 keep a file's directory in a
``path`` column, later ones in ``pathtable``.  A written file's mode is not
recorded there: it is taken as a regular file 0644.
"""

from __future__ import annotations

import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

from shournal import _paths
from shournal.importers import History, ImportFailed, identity
from shournal.importers.entries import check_time
from shournal.importers.sqlite_file import columns, opened
from shournal.record import CommandRecord, FileEvent

KIND = "shournal"
WHAT = "a database of the original shournal"

# The newest scheme version whose layout this importer knows.
NEWEST_SCHEME = (3, 2)

_WRITTEN_MODE = stat.S_IFREG | 0o644
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TABLES = {"version", "env", "cmd", "writtenFile", "readFile", "readFileCmd"}


def default_path() -> Path:
    # The original's data directory is ours ($XDG_DATA_HOME/shournal).
    return _paths.data_dir() / "database.db"


def _ns(value: object, where: str) -> int:
    """A stored local time (ISO text) -> ns since the epoch, UTC."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise ImportFailed(f"{where}: not {WHAT}: time {value!r} is not ISO") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone of that moment
    delta = moment - _EPOCH
    return check_time(
        (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000, where
    )


def _hash(value: object) -> int | None:
    if value is None or value == b"" or value == "":
        return None
    if isinstance(value, bytes) and len(value) == 8:
        return int.from_bytes(value, "little")
    raise ValueError(f"hash {value!r} is not 8 bytes")


def _mode(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes) and 0 < len(value) <= 8:
        return int.from_bytes(value, "little")
    raise ValueError(f"mode {value!r}")


def _path(directory: object, name: object) -> bytes:
    d = str(directory).rstrip("/")
    return f"{d}/{name}".encode("utf-8", "surrogateescape")


def _version(conn: sqlite3.Connection, path: Path) -> tuple[int, ...]:
    row = conn.execute("SELECT ver FROM version ORDER BY id LIMIT 1").fetchone()
    if row is None:
        raise ImportFailed(f"{path}: not {WHAT}: no scheme version")
    try:
        version = tuple(int(p) for p in str(row[0]).split("."))
    except ValueError:
        raise ImportFailed(f"{path}: not {WHAT}: scheme version {row[0]!r}") from None
    if version > NEWEST_SCHEME:
        raise ImportFailed(
            f"{path}: the original shournal's scheme version {row[0]} is newer than this "
            f"import knows ({'.'.join(map(str, NEWEST_SCHEME))}); upgrade shournal"
        )
    return version


def read(path: Path) -> History:
    with opened(path, WHAT) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted(_TABLES - tables)
        if missing:
            raise ImportFailed(f"{path}: not {WHAT}: no table {', '.join(missing)}")
        _version(conn, path)
        try:
            return _read(conn, path)
        except (ValueError, TypeError) as e:
            raise ImportFailed(f"{path}: not {WHAT}: {e}") from None


def _dir_join(conn: sqlite3.Connection, table: str, alias: str) -> tuple[str, str]:
    """(column expression of a file's directory, join) of ``table``."""
    if "pathId" in columns(conn, table):
        return "p.path", f"JOIN pathtable p ON p.id = {alias}.pathId"
    return f"{alias}.path", ""


def _read(conn: sqlite3.Connection, path: Path) -> History:
    hashmeta = {
        id_: (chunk, reads)
        for id_, chunk, reads in conn.execute("SELECT id, chunkSize, maxCountOfReads FROM hashmeta")
    }
    wdir, wjoin = _dir_join(conn, "writtenFile", "w")
    writes: dict[int, list[FileEvent]] = {}
    for cmd_id, directory, name, mtime, size, hash_ in conn.execute(
        f"SELECT w.cmdId, {wdir}, w.name, w.mtime, w.size, w.hash FROM writtenFile w {wjoin} "
        "ORDER BY w.id"
    ):
        writes.setdefault(cmd_id, []).append(
            FileEvent(_path(directory, name), int(size), _ns(mtime, f"{path}: written file"),
                      _WRITTEN_MODE, _hash(hash_))
        )
    rdir, rjoin = _dir_join(conn, "readFile", "r")
    stored_dir = path.parent / "readFiles"
    notes: list[str] = []
    reads: dict[int, list[FileEvent]] = {}
    for cmd_id, file_id, directory, name, mtime, size, mode, hash_, on_disk in conn.execute(
        f"SELECT c.cmdId, r.id, {rdir}, r.name, r.mtime, r.size, r.mode, r.hash, "
        f"r.isStoredToDisk FROM readFileCmd c JOIN readFile r ON r.id = c.readFileId {rjoin} "
        "ORDER BY c.id"
    ):
        content = None
        if on_disk:
            try:
                content = (stored_dir / str(int(file_id))).read_bytes()
            except OSError as e:
                notes.append(f"the stored read file {stored_dir / str(file_id)} "
                             f"({_path(directory, name).decode(errors='replace')}) "
                             f"cannot be read: {e.strerror}; imported without its content")
        reads.setdefault(cmd_id, []).append(
            FileEvent(_path(directory, name), int(size), _ns(mtime, f"{path}: read file"),
                      _mode(mode), _hash(hash_), content)
        )
    records = []
    for (cmd_id, session, hashmeta_id, text, return_value, start, end, cwd, user,
         host) in conn.execute(
        "SELECT c.id, c.sessionId, c.hashmetaId, c.txt, c.returnVal, c.startTime, c.endTime, "
        "c.workingDirectory, e.username, e.hostname FROM cmd c JOIN env e ON e.id = c.envId "
        "ORDER BY c.startTime, c.id"
    ):
        where = f"{path}: command {cmd_id}"
        if session is not None and (not isinstance(session, bytes) or len(session) != 16):
            raise ImportFailed(f"{where}: not {WHAT}: session id {session!r}")
        chunk, max_reads = hashmeta.get(hashmeta_id, (None, None))
        start_ns = _ns(start, where)
        records.append(
            CommandRecord(
                text=str(text),
                return_value=int(return_value),
                start_ns=start_ns,
                end_ns=max(_ns(end, where), start_ns),
                working_dir=str(cwd),
                username=str(user),
                hostname=str(host),
                session_uuid=session,
                hash_chunk_size=chunk,
                hash_max_reads=max_reads,
                writes=writes.get(cmd_id, []),
                reads=reads.get(cmd_id, []),
            )
        )
    identity.assign(KIND, records, [True] * len(records))
    return History(records, notes)
