"""The journal store on SQLite and on a private PostgreSQL server."""

from __future__ import annotations

import multiprocessing
import os
import random
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text

from shournal.criteria import parse_criteria
from shournal.data import RETURN_VALUE_UNKNOWN, CommandView
from shournal.journal import Journal
from shournal.record import LOST_REASONS, CommandRecord, FileEvent
from shournal.store import (
    SchemaTooNew,
    Store,
    StoreCorrupt,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from shournal.store import models as m
from shournal.store.engine import _fs_type
from shournal.store.migrations import SCHEMA_VERSION

T0 = 1_700_000_000_123_456_000  # ns, UTC


def find_commands(store: Store, *args: Any, **kw: Any) -> list[CommandView]:
    """What the journal's readers see of what these tests stored."""
    return Journal(store).find(*args, **kw)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "journal.sqlite")
    return request.getfixturevalue("pg_fresh_url")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as s:
        yield s


def record(**overrides: object) -> CommandRecord:
    values: dict[str, object] = {
        "text": "make -j8",
        "return_value": 0,
        "start_ns": T0,
        "end_ns": T0 + 65_000_000_000,
        "working_dir": "/home/u/src",
        "username": "u",
        "hostname": "box",
        "session_uuid": bytes(range(16)),
        "hash_chunk_size": 256,
        "hash_max_reads": 3,
    }
    values.update(overrides)
    return CommandRecord(**values)  # type: ignore[arg-type]


def event(
    path: bytes, *, size: int = 10, mtime_ns: int = T0, hash: int | None = 1, **kw: object
) -> FileEvent:
    return FileEvent(path=path, size=size, mtime_ns=mtime_ns, mode=0o100644, hash=hash, **kw)  # type: ignore[arg-type]


def count(s: Store, model: type[m.Base]) -> int:
    with s.reading() as conn:
        return conn.execute(select(func.count()).select_from(model.__table__)).scalar_one()


# -- round trip ---------------------------------------------------------------


def test_round_trip_non_utf8_paths_and_large_hashes(store: Store) -> None:
    script = b"#!/bin/sh\necho hi\n"
    rec = record(
        writes=[
            event(b"/tmp/\xff\xfe/na\xefve.txt", size=3, hash=2**64 - 1),
            event(b"/tmp/empty", size=0, hash=None),
            event(b"relative-name", size=5, hash=0),
            event(b"/top", size=7, hash=2**63),
        ],
        reads=[event(b"/home/u/run.sh", size=len(script), hash=2**63 + 5, content=script)],
        dropped_writes=7,
        dropped_reads=2,
        lost_events=3,
    )
    cid = store.add_command(rec)
    [cmd] = find_commands(store, command_id=cid)
    assert cmd.text == "make -j8"
    assert cmd.return_value == 0
    assert cmd.start_time == datetime.fromtimestamp(T0 // 10**9, UTC).replace(microsecond=123456)
    assert cmd.end_time.tzinfo is not None
    assert (cmd.working_dir, cmd.username, cmd.hostname) == ("/home/u/src", "u", "box")
    assert cmd.session_uuid == bytes(range(16))
    assert (cmd.hash_chunk_size, cmd.hash_max_reads) == (256, 3)
    assert (cmd.dropped_writes, cmd.dropped_reads, cmd.lost_events) == (7, 2, 3)
    assert [(w.path, w.size, w.hash) for w in cmd.writes] == [
        (b"/tmp/\xff\xfe/na\xefve.txt", 3, 2**64 - 1),
        (b"/tmp/empty", 0, None),
        (b"relative-name", 5, 0),
        (b"/top", 7, 2**63),
    ]
    assert all(w.mtime_ns == T0 and w.mode == 0o100644 for w in cmd.writes)
    assert all(not w.is_stored for w in cmd.writes)
    [r] = cmd.reads
    assert (r.path, r.hash, r.is_stored, r.content_preview, r.content_size) == (
        b"/home/u/run.sh",
        2**63 + 5,
        True,
        script,
        len(script),
    )
    # Hashes are 8 raw little-endian bytes; "no hash" is b"", never NULL.
    with store.reading() as conn:
        raw = [
            *conn.execute(
                select(m.WriteEvent.hash)
                .where(m.WriteEvent.command_id == cid)
                .order_by(m.WriteEvent.id)
            ).scalars(),
            *conn.execute(select(m.ReadFile.hash)).scalars(),
        ]
        assert [bytes(h) for h in raw] == [
            b"\xff" * 8,
            b"",
            b"\x00" * 8,
            (2**63).to_bytes(8, "little"),
            (2**63 + 5).to_bytes(8, "little"),
        ]


def test_text_with_undecodable_bytes_is_stored_escaped(store: Store) -> None:
    cid = store.add_command(record(text="cat \udcff\x00", working_dir="/x/\udcfe"))
    [cmd] = find_commands(store, command_id=cid)
    assert cmd.text == "cat \\xff\\x00"
    assert cmd.working_dir == "/x/\\xfe"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"text": "cat \udcff\x00", "working_dir": "/x/\udcfe", "incomplete": True,
         "lost_reasons": {"overflow": 2, "relay": 1}, "lost_events": 3, "return_value": -1},
        {"session_uuid": None, "hash_chunk_size": None, "hash_max_reads": None},
    ],
)
def test_sqlite_rows_on_the_drivers_cursor_equal_sqlalchemys(
    tmp_path: Path, overrides: dict[str, object]
) -> None:
    """SQLite runs the statements every command line runs on the driver's
    cursor (shournal.store.precompiled): what it stores must be, byte for
    byte, what SQLAlchemy's own execution stores (a datetime without its
    microseconds, say, would no longer match has_command's lookup)."""
    rows = []
    for precompile in (False, True):
        with Store(sqlite_url(tmp_path / f"journal-{precompile}.sqlite")) as s:
            s.writer._precompile = precompile
            # (the second on a whole second: no microseconds to write)
            recs = [record(**overrides), record(**{**overrides, "start_ns": T0 - 123_456_000})]
            s.add_commands(recs)
            assert all(s.has_command(rec) for rec in recs)
        with closing(sqlite3.connect(tmp_path / f"journal-{precompile}.sqlite")) as raw:
            rows.append(
                [
                    raw.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
                    for table in ("command", "env", "working_dir", "shell_session", "hash_setting")
                ]
            )
    assert rows[0] == rows[1]
    assert rows[1][0][0][3] == "2023-11-14 22:13:20.123456"  # start_time as SQLAlchemy writes it


@pytest.mark.parametrize("with_files", [False, True])
def test_sqlite_a_failed_write_leaves_no_transaction_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_files: bool
) -> None:
    """SQLite's write transaction is begun on the driver, and its connection
    is kept for the next one: a batch failing half-way is rolled back whole, whether
    its statements all ran on the driver (no files) or some through
    SQLAlchemy, and the next batch commits only itself."""
    path = tmp_path / "journal.sqlite"
    files = {"writes": [event(b"/w/out")]} if with_files else {}
    with Store(sqlite_url(path)) as s:
        # (its host, directory and session are then known: without files
        # the batch below runs no statement through SQLAlchemy)
        s.add_commands([record(text="z", start_ns=T0 - 10**9)])
        insert, calls = s.writer._insert, []

        def failing_second(*args: Any) -> int:
            calls.append(args[1].text)
            if len(calls) == 2:
                raise RuntimeError("the journal failed half-way")
            return insert(*args)

        monkeypatch.setattr(s.writer, "_insert", failing_second)
        with pytest.raises(RuntimeError):
            s.add_commands([record(text="a", **files), record(text="b", start_ns=T0 + 1, **files)])
        monkeypatch.undo()
        assert s.add_commands([record(text="c", start_ns=T0 + 2, **files)]) == 1
    with closing(sqlite3.connect(path)) as raw:
        assert [t for (t,) in raw.execute("SELECT text FROM command ORDER BY id")] == ["z", "c"]


def test_no_session_and_hashing_off(store: Store) -> None:
    cid = store.add_command(
        record(session_uuid=None, hash_chunk_size=None, hash_max_reads=None, return_value=2**31 - 1)
    )
    [cmd] = find_commands(store, command_id=cid)
    assert cmd.session_uuid is None
    assert cmd.hash_chunk_size is None and cmd.hash_max_reads is None
    assert not cmd.return_value_known
    assert cmd.writes == [] and cmd.reads == []


def test_deduplication(store: Store) -> None:
    script = b"echo same\n"
    for i in range(3):
        store.add_command(
            record(
                text=f"cmd {i}",
                writes=[event(b"/a/b/one"), event(b"/a/b/two"), event(f"/a/c{i}/x".encode())],
                reads=[event(b"/a/s.sh", size=len(script), content=script)],
            )
        )
    store.add_command(record(session_uuid=b"\x01" * 16, hostname="other", hash_chunk_size=512))
    assert count(store, m.Command) == 4
    assert count(store, m.Directory) == 1 + 3 + 1  # /a/b/, /a/c0..2/, /a/
    assert count(store, m.Content) == 1
    assert count(store, m.ShellSession) == 2
    assert count(store, m.Env) == 2
    assert count(store, m.HashSetting) == 2
    assert count(store, m.WriteEvent) == 3 * 3
    # One read file version, read by three commands.
    assert count(store, m.ReadFile) == 1
    assert count(store, m.ReadEvent) == 3
    with store.reading() as conn:
        algorithm = conn.execute(select(m.Content.algorithm)).scalar_one()
    assert algorithm == m.CONTENT_DIGEST_ALGORITHM


def test_failed_insert_leaves_nothing_behind(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_command(record(text="before"))
    from shournal.store.writer import Writer

    real_ids = Writer._read_file_ids

    def failing_ids(self: Writer, *args: Any) -> list[int]:
        real_ids(self, *args)
        raise RuntimeError("disk went away")

    # Fails inside the transaction, after the command row, the directories,
    # the content, the writes and the read files were inserted.
    monkeypatch.setattr(Writer, "_read_file_ids", failing_ids)
    bad = record(
        text="bad",
        session_uuid=b"\x09" * 16,
        writes=[event(b"/new/dir/ok"), event(b"/new/dir/also")],
        reads=[event(b"/new/s.sh", content=b"x")],
    )
    with pytest.raises(RuntimeError):
        store.add_command(bad)
    assert count(store, m.Command) == 1
    assert count(store, m.ShellSession) == 1
    assert count(store, m.Directory) == 0
    assert count(store, m.Content) == 0
    assert count(store, m.WriteEvent) == 0
    assert count(store, m.ReadFile) == 0
    assert count(store, m.ReadEvent) == 0


def test_invalid_record_rejected(store: Store) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        store.add_command(record(writes=[event(b"/x", hash=2**64)]))
    with pytest.raises(ValueError, match="16"):
        store.add_command(record(session_uuid=b"short"))
    with pytest.raises(ValueError, match="range"):
        store.add_command(record(writes=[event(b"/x", size=2**70)]))
    assert count(store, m.Command) == 0


def test_reopen_is_idempotent(db_url: str) -> None:
    with Store(db_url) as s:
        s.add_command(record())
    with Store(db_url) as s:
        assert count(s, m.Command) == 1


# -- schema version and damaged databases -------------------------------------


def test_readers_do_not_create(db_url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreMissing):
        Store(db_url, create=False)
    assert list(tmp_path.iterdir()) == []  # no SQLite file appeared
    with Store(db_url) as s:
        s.add_command(record())
    with Store(db_url, create=False) as s:
        assert count(s, m.Command) == 1


def test_schema_too_new(db_url: str) -> None:
    with Store(db_url) as s:
        s.add_command(record())
        with s.writing() as conn:
            conn.execute(m.SchemaVersion.__table__.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaTooNew) as info:
        Store(db_url)
    message = str(info.value)
    assert "\n" not in message and "newer" in message
    assert isinstance(info.value, StoreError)


def test_corrupted_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    garbage = b"this is not a database, " * 400
    path.write_bytes(garbage)
    with pytest.raises(StoreCorrupt) as info:
        Store(sqlite_url(path))
    assert "\n" not in str(info.value)
    assert path.read_bytes() == garbage


def test_foreign_database_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE command (x TEXT)")
    with pytest.raises(StoreCorrupt, match="not a shournal journal"):
        Store(sqlite_url(path))
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == {"command"}


def test_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable):
        Store(sqlite_url(tmp_path / "missing-dir" / "j.sqlite"))
    with pytest.raises(StoreUnavailable, match="unsupported"):
        Store("mysql://u@h/db")
    with pytest.raises(StoreUnavailable, match="invalid"):
        Store("not a url")


def test_unreachable_postgres(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable) as info:
        Store(f"postgresql+psycopg://nobody@/db?host={tmp_path}")
    assert "\n" not in str(info.value)


def test_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with Store() as s:
        s.add_command(record())
    from shournal import _paths

    db = _paths.default_db_path()
    assert db.is_file()
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("create", [True, False])
def test_default_location_of_another_user_or_open_to_others_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, create: bool
) -> None:
    """A data directory (after links) that is not the user's own, or that
    group or others may write, is never used: somebody else could read or
    forge the journal (tests/system/test_runtime_security.py has the attack)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    real = tmp_path / "shared" / "journal"
    real.mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shournal").symlink_to(real)
    real.chmod(0o777)
    with pytest.raises(StoreUnavailable, match=r"-> .*journal is writable by group or others"):
        Store(create=create)
    real.chmod(0o700)
    os.chown(real, 65534, -1)  # nobody
    with pytest.raises(StoreUnavailable, match="belongs to uid 65534, not to you"):
        Store(create=create)
    assert os.listdir(real) == []
    os.chown(real, os.getuid(), -1)
    if create:
        with Store() as s:
            s.add_command(record())
        assert (real / "journal.sqlite").is_file()


def test_sqlite_pragmas(tmp_path: Path) -> None:
    with Store(sqlite_url(tmp_path / "j.sqlite")) as s, s.reading() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 15000
        assert conn.execute(text("PRAGMA synchronous")).scalar_one() == 1  # NORMAL


def test_fs_type_from_mountinfo(tmp_path: Path) -> None:
    assert _fs_type(Path("/proc/self")) == "proc"
    assert _fs_type(Path("/")) is not None
    fake = tmp_path / "mountinfo"
    fake.write_text(
        "22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n"
        "40 22 0:50 / /home rw,relatime shared:1 - nfs4 srv:/home rw,vers=4.2\n"
        "41 40 0:51 / /home/u/my\\040disk rw - ext4 /dev/sdb1 rw\n"
    )
    assert _fs_type(Path("/home/u/.local/share"), str(fake)) == "nfs4"
    assert _fs_type(Path("/homework"), str(fake)) == "ext4"
    assert _fs_type(Path("/home/u/my disk/x"), str(fake)) == "ext4"


def test_sqlite_on_nfs_avoids_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shournal.store.engine as engine

    monkeypatch.setattr(engine, "_fs_type", lambda path: "nfs4")
    with Store(sqlite_url(tmp_path / "j.sqlite")) as s, s.reading() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar_one() == "delete"


# -- concurrency --------------------------------------------------------------


def _concurrent_writer(url: str, worker: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    # Both processes create the schema at the same moment, then interleave.
    with Store(url) as s:
        for i in range(15):
            s.add_command(
                record(
                    text=f"w{worker} {i}",
                    session_uuid=bytes([worker]) * 16,
                    writes=[event(b"/shared/dir/f"), event(f"/w{worker}/{i}/g".encode())],
                    # The same read file versions from both processes at
                    # once: stored once each, never a failure.
                    reads=[event(b"/shared/lib.so"), event(f"/shared/r{i}".encode())],
                )
            )


def test_concurrent_writers(db_url: str) -> None:
    url = db_url
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_concurrent_writer, args=(url, w, barrier)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with Store(url) as s:
        assert count(s, m.Command) == 30
        assert count(s, m.ShellSession) == 2
        assert count(s, m.Directory) == 2 + 30  # /shared/dir/, /shared/, /wN/i/
        assert count(s, m.WriteEvent) == 60
        assert count(s, m.ReadFile) == 1 + 15
        assert count(s, m.ReadEvent) == 60


# -- storage footprint --------------------------------------------------------

_WORDS = (
    "drivers net ethernet intel e1000 e1000e igb ixgbe fs ext4 btrfs xfs nfs kernel sched mm "
    "arch x86 include linux uapi asm sound soc codecs usb core host gadget gpu drm amd i915 "
    "block crypto lib tools scripts security selinux firmware media video pci bus acpi power"
).split()
_SUFFIXES = (".c", ".h", ".o", ".o.cmd", ".S", ".ko", ".mod.c")


def source_tree_events(n: int, seed: int = 1) -> tuple[list[FileEvent], list[FileEvent]]:
    """Events shaped like a kernel build: ~15 files per directory, paths like
    /home/u/linux-6.1/drivers/net/ethernet/intel/e1000/e1000_main.c."""
    rnd = random.Random(seed)
    dirs = [
        "/home/u/linux-6.1/" + "/".join(rnd.choice(_WORDS) for _ in range(rnd.randint(2, 6)))
        for _ in range(max(1, n // 15))
    ]
    writes: list[FileEvent] = []
    reads: list[FileEvent] = []
    for i in range(n):
        words = "_".join(rnd.choice(_WORDS) for _ in range(rnd.randint(1, 2)))
        path = f"{rnd.choice(dirs)}/{words}{i % 7}{rnd.choice(_SUFFIXES)}".encode()
        ev = FileEvent(
            path=path,
            size=rnd.randint(100, 200_000),
            mtime_ns=T0 + rnd.randint(0, 10**15),
            mode=0o100644,
            hash=rnd.getrandbits(64),
        )
        (reads if rnd.random() < 0.3 else writes).append(ev)
    return writes, reads


def journal_bytes(path: Path) -> int:
    """The SQLite journal with its -wal and -shm files."""
    return path.stat().st_size + sum(
        p.stat().st_size for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def stored_bytes_per_event(
    path: Path, writes: list[FileEvent], reads: list[FileEvent], what: str
) -> float:
    """Bytes per file event that a new SQLite journal at ``path`` grows by
    when it takes one command with these events: the journal's size less
    that of an empty journal (the first pages of every table, paid once per
    journal whatever it holds, and growing with each table a schema adds).
    How fast the store takes them is bench/storage.py's business."""
    empty = path.with_name(f"empty-{path.name}")
    with Store(sqlite_url(empty)):
        pass
    with Store(sqlite_url(path)) as s:
        s.add_command(record(writes=writes, reads=reads))
    # Closing the last connection checkpoints the WAL into the main file.
    size = journal_bytes(path) - journal_bytes(empty)
    n = len(writes) + len(reads)
    print(f"\nstorage ({what}): {size / n:.1f} bytes/event ({size} bytes, {n} events)")
    return size / n


def test_storage_bytes_per_event(tmp_path: Path) -> None:
    writes, reads = source_tree_events(20_000)
    per_event = stored_bytes_per_event(tmp_path / "j.sqlite", writes, reads, "build")
    # Schema 2 (one file_event table): 93.6; schema 3: 99.9 (96.3 at
    # 150,000 events), every read here being a new version (nothing to
    # deduplicate) that costs a read_file row and index entry plus a
    # read_event link both ways; ~3.5 of it are the first pages of the
    # nearly empty tables (see bench/README.md).  Directories found by
    # path_hash instead of a unique path index, and the common mode stored
    # as NULL: 95.0 (91.4 at 150,000).  Without the empty journal's pages
    # (144 KiB at schema 10, 7.4 of it per event here): 89.3.
    assert per_event <= 90


def copy_tree_events(files: int, seed: int = 2) -> tuple[list[FileEvent], list[FileEvent]]:
    """``cp -a`` of a source tree shaped like Linux's (~16 files per
    directory, directories ~44 bytes below the tree's root, names ~13)
    between two long workspace paths: each file read once and written once."""
    rnd = random.Random(seed)
    root = "/var/tmp/shournal-bench/fs/{}/linux-source-6.1/"
    dirs = [
        "/".join(rnd.choice(_WORDS) for _ in range(rnd.randint(3, 7))) + "/"
        for _ in range(max(1, files // 16))
    ]
    writes: list[FileEvent] = []
    reads: list[FileEvent] = []
    for i in range(files):
        rel = f"{rnd.choice(dirs)}{rnd.choice(_WORDS)}_{i}{rnd.choice(_SUFFIXES)}"
        size, mtime = rnd.randint(100, 200_000), T0 + rnd.randint(0, 10**15)
        mode, h = (0o100755 if rnd.random() < 0.02 else 0o100644), rnd.getrandbits(64)
        for side, out in (("src", reads), ("dst", writes)):
            out.append(FileEvent(path=(root.format(side) + rel).encode(), size=size,
                                 mtime_ns=mtime, mode=mode, hash=h))  # fmt: skip
    return writes, reads


def test_storage_bytes_per_event_copy(tmp_path: Path) -> None:
    """The copy benchmark's shape: long paths, every read a new version."""
    writes, reads = copy_tree_events(20_000)
    per_event = stored_bytes_per_event(tmp_path / "j.sqlite", writes, reads, "copy")
    # 107.1 with a unique index on directory paths and every mode stored;
    # 99.7 (100.1 for all 78,579 files; the real benchmark's paths, in
    # their directory order, come out ~1 byte lower), of which the empty
    # journal's pages were ~3.4.  Without them (what each event costs;
    # docs/benchmarks.md's figure, bench/storage.py, is the whole file):
    # 96.9 at schema 10.
    assert per_event <= 97.5


def test_large_command_round_trip_counts(store: Store) -> None:
    writes, reads = source_tree_events(3000, seed=7)
    cid = store.add_command(record(writes=writes, reads=reads))
    [cmd] = find_commands(store, command_id=cid, max_files=4)
    assert (cmd.write_count, cmd.read_count) == (len(writes), len(reads))
    assert [w.path for w in cmd.writes] == [w.path for w in writes[:4]]
    # Reads come by read file id: new versions get theirs in path order.
    assert [r.path for r in cmd.reads] == sorted(r.path for r in reads)[:4]
    [full] = find_commands(store, command_id=cid)
    assert [w.hash for w in full.writes] == [w.hash for w in writes]


def test_indexes(tmp_path: Path) -> None:
    # Only the indexes the queries need.
    with Store(sqlite_url(tmp_path / "j.sqlite")) as s:
        assert _indexes(s, "write_event") == {
            "ix_write_event_hash_size": ["hash", "size"],
            "ix_write_event_command_id": ["command_id"],
            "ix_write_event_hashless_mtime_ns": ["mtime_ns"],  # partial
        }
        assert _indexes(s, "read_event") == {
            "ix_read_event_read_file_id_command_id": ["read_file_id", "command_id"]
        }
        assert _indexes(s, "read_file") == {
            "ix_read_file_hash_size_mtime_ns": ["hash", "size", "mtime_ns"]
        }
        # Directories by the hash of their path, not by the path itself.
        assert _indexes(s, "directory") == {"ix_directory_path_hash": ["path_hash"]}
        assert _unique_constraints(s, "directory") == []
        assert _indexes(s, "command") == {
            "ix_command_start_time": ["start_time"],
            "ix_command_session_id": ["session_id"],
            "ix_command_import_key": ["import_key"],  # partial: imported commands only
            "ix_command_cwd_id": ["cwd_id"],
            "ix_command_uuid": ["uuid"],  # unique: a command stored twice is stored once
        }


def _unique_constraints(s: Store, table: str) -> list[Any]:
    from sqlalchemy import inspect

    with s.reading() as conn:
        found = inspect(conn).get_unique_constraints(table)
        found += [ix for ix in inspect(conn).get_indexes(table) if ix["unique"]]
        return found


def _indexes(s: Store, table: str) -> dict[str, list[str]]:
    from sqlalchemy import inspect

    with s.reading() as conn:
        return {ix["name"]: ix["column_names"] for ix in inspect(conn).get_indexes(table)}


def _columns(s: Store, table: str) -> list[dict[str, Any]]:
    from sqlalchemy import inspect

    with s.reading() as conn:
        return list(inspect(conn).get_columns(table))


def _tables(s: Store) -> set[str]:
    from sqlalchemy import inspect

    with s.reading() as conn:
        return set(inspect(conn).get_table_names())


@contextmanager
def _writing_without_foreign_keys(s: Store) -> Iterator[Connection]:
    """A write transaction; on SQLite with foreign keys off (a table
    rebuild would cascade), which only works outside a transaction."""
    if s.dialect_name != "sqlite":
        with s.writing() as conn:
            yield conn
        return
    with s.engine.connect() as raw:
        dbapi = raw.connection.dbapi_connection
        assert dbapi is not None
        dbapi.execute("PRAGMA foreign_keys=OFF")
        try:
            with raw.execution_options(shournal_write=True).begin():
                yield raw
        finally:
            dbapi.execute("PRAGMA foreign_keys=ON")


def _downgrade_to(s: Store, version: int) -> None:
    """Turn a journal of the current schema back into schema ``version``
    (1 or 2): one file_event table, each read stored once per command."""
    sqlite = s.dialect_name == "sqlite"
    blob = "BLOB" if sqlite else "BYTEA"
    with _writing_without_foreign_keys(s) as conn:
        conn.execute(
            text(
                f"CREATE TABLE file_event (id {'INTEGER' if sqlite else 'BIGSERIAL'} PRIMARY KEY, "
                "command_id BIGINT NOT NULL REFERENCES command (id) ON DELETE CASCADE, "
                "kind SMALLINT NOT NULL, directory_id BIGINT NOT NULL REFERENCES directory (id), "
                f"basename {blob} NOT NULL, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL, "
                f"hash {blob} NOT NULL, mode INTEGER NOT NULL, "
                "content_id BIGINT REFERENCES content (id), "
                "CONSTRAINT ck_file_event_kind CHECK (kind IN (0, 1)), "
                "CONSTRAINT ck_file_event_hash_length CHECK (length(hash) IN (0, 8)))"
            )
        )
        cols = "directory_id, basename, size, mtime_ns, hash, mode"
        # Schema 3 stores the common mode as NULL.
        stored = cols.replace("mode", f"coalesce(mode, {m.COMMON_MODE})")
        stored_f = ", ".join(f"f.{c}" for c in cols.split(", ")).replace(
            "f.mode", f"coalesce(f.mode, {m.COMMON_MODE})"
        )
        # Writes keep their ids; reads get ids after them, command by command.
        conn.execute(
            text(
                f"INSERT INTO file_event (id, command_id, kind, {cols}) "
                f"SELECT id, command_id, 0, {stored} FROM write_event"
            )
        )
        top = conn.execute(text("SELECT coalesce(max(id), 0) FROM write_event")).scalar_one()
        reads = conn.execute(
            text(
                f"SELECT e.command_id, {stored_f}, "
                "f.content_id FROM read_event e JOIN read_file f ON f.id = e.read_file_id "
                "ORDER BY e.command_id, f.id"
            )
        ).all()
        for i, row in enumerate(reads, start=top + 1):
            conn.execute(
                text(
                    f"INSERT INTO file_event (id, command_id, kind, {cols}, content_id) "
                    "VALUES (:id, :c, 1, :d, :b, :s, :m, :h, :o, :ct)"
                ),
                dict(zip(("c", "d", "b", "s", "m", "h", "o", "ct"), row, strict=True), id=i),
            )
        for table in ("read_event", "read_file", "write_event", "redaction"):
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("DROP INDEX ix_command_session_id"))
        _cwd_back_to_text(conn, sqlite)
        content = "(hash, size)" if version == 2 else "(hash)"
        name = "ix_file_event_hash_size" if version == 2 else "ix_file_event_hash"
        conn.execute(text(f"CREATE INDEX {name} ON file_event {content}"))
        conn.execute(text("CREATE INDEX ix_file_event_command_id ON file_event (command_id)"))
        _directory_back_to_unique_path(conn, sqlite)
        conn.execute(m.SchemaVersion.__table__.update().values(version=version))


def _sqlite_rebuild(conn: Connection, table: str, columns: str, select: str) -> None:
    """SQLite cannot alter constraints or drop referenced columns: build the
    table anew with `columns`, filled by `select`."""
    conn.execute(text(f"CREATE TABLE {table}_rebuilt ({columns})"))
    conn.execute(text(f"INSERT INTO {table}_rebuilt {select}"))
    conn.execute(text(f"DROP TABLE {table}"))
    conn.execute(text(f"ALTER TABLE {table}_rebuilt RENAME TO {table}"))


def _directory_back_to_unique_path(conn: Connection, sqlite: bool) -> None:
    """directory as schemas 1 and 2 had it: a unique path, no path_hash."""
    if not sqlite:
        conn.execute(text("ALTER TABLE directory DROP COLUMN path_hash"))
        conn.execute(text("ALTER TABLE directory ADD CONSTRAINT uq_directory_path UNIQUE (path)"))
        return
    _sqlite_rebuild(
        conn, "directory",
        "id INTEGER NOT NULL, path BLOB NOT NULL, CONSTRAINT pk_directory PRIMARY KEY (id), "
        "CONSTRAINT uq_directory_path UNIQUE (path)",
        "SELECT id, path FROM directory",
    )



def _cwd_back_to_text(conn: Connection, sqlite: bool) -> None:
    """command.cwd_id -> the working_dir text column of schemas 1 and 2."""
    if not sqlite:
        # schema 6's lost events by reason and schema 7's incomplete (the
        # SQLite rebuild below drops them)
        for reason in LOST_REASONS:
            conn.execute(text(f"ALTER TABLE command DROP COLUMN lost_{reason}"))
        conn.execute(text("ALTER TABLE command DROP COLUMN incomplete"))
        conn.execute(text("ALTER TABLE command ADD COLUMN working_dir TEXT"))
        conn.execute(
            text(
                "UPDATE command SET working_dir = "
                "(SELECT path FROM working_dir w WHERE w.id = command.cwd_id)"
            )
        )
        conn.execute(text("ALTER TABLE command ALTER COLUMN working_dir SET NOT NULL"))
        conn.execute(text("ALTER TABLE command DROP COLUMN cwd_id"))
        conn.execute(text("DROP TABLE working_dir"))
        return
    # SQLite cannot drop a referencing column: rebuild the table as schema
    # 2 had it (the caller turned foreign keys off).
    _sqlite_rebuild(
        conn, "command",
        "id INTEGER NOT NULL PRIMARY KEY, text TEXT NOT NULL, "
        "return_value INTEGER NOT NULL, start_time DATETIME NOT NULL, "
        "end_time DATETIME NOT NULL, working_dir TEXT NOT NULL, "
        "session_id INTEGER REFERENCES shell_session (id), "
        "env_id INTEGER NOT NULL REFERENCES env (id), "
        "hash_setting_id INTEGER REFERENCES hash_setting (id), "
        "dropped_writes INTEGER NOT NULL, dropped_reads INTEGER NOT NULL, "
        "lost_events INTEGER NOT NULL",
        "SELECT c.id, c.text, c.return_value, c.start_time, c.end_time, w.path, "
        "c.session_id, c.env_id, c.hash_setting_id, c.dropped_writes, c.dropped_reads, "
        "c.lost_events FROM command c JOIN working_dir w ON w.id = c.cwd_id",
    )
    conn.execute(text("CREATE INDEX ix_command_start_time ON command (start_time)"))
    conn.execute(text("DROP TABLE working_dir"))


def _snapshot(s: Store) -> list[tuple[Any, ...]]:
    return [
        (
            c.id,
            c.text,
            [(w.id, w.path, w.size, w.mtime_ns, w.hash, w.mode) for w in c.writes],
            [(r.path, r.size, r.mtime_ns, r.hash, r.mode, r.content_preview) for r in c.reads],
        )
        for c in find_commands(s)
    ]


@pytest.mark.parametrize("old_version", [1, 2])
def test_upgrade_to_split_events(db_url: str, tmp_path: Path, old_version: int) -> None:
    """A journal of schema 1 or 2 (one file_event table) is upgraded on
    open: writes move to write_event, reads are deduplicated into read_file
    and read_event, the data and the ids stay."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"x" * 1000)
    st = target.stat()
    from shournal.hashing import partial_xxh64_bytes

    h = partial_xxh64_bytes(target.read_bytes())
    script = b"#!/bin/sh\necho hi\n"
    with Store(db_url) as s:
        cids = [
            s.add_command(
                record(
                    text=f"cmd {i}",
                    writes=[event(b"/w/out.bin", size=1000, hash=h, mtime_ns=st.st_mtime_ns),
                            event(f"/w/{i}".encode())],
                    reads=[event(b"/w/run.sh", size=len(script), content=script),
                           event(b"/usr/lib/libc.so", size=99), event(f"/r/{i}".encode())],
                )  # fmt: skip
            )
            for i in range(3)
        ]
        before = _snapshot(s)
        _downgrade_to(s, old_version)
        assert "file_event" in _tables(s)
        with s.reading() as conn:
            read_ids = conn.execute(
                text("SELECT id FROM file_event WHERE kind = 1 AND content_id IS NOT NULL")
            ).scalars().all()  # fmt: skip
        assert len(read_ids) == 3
    for _ in range(2):  # the second open finds the current schema
        with Store(db_url, create=False) as s:
            tables = _tables(s)
            assert "file_event" not in tables
            assert {"write_event", "read_file", "read_event"} <= tables
            with s.reading() as conn:
                version = conn.execute(select(m.SchemaVersion.version)).scalar_one()
            assert version == SCHEMA_VERSION
            # lost events by reason: added, and nothing recorded for old rows
            columns = {c["name"] for c in _columns(s, "command")}
            assert {f"lost_{r}" for r in LOST_REASONS} <= columns
            assert all(c.lost_reasons == {} for c in find_commands(s))
            assert "incomplete" in columns
            assert not any(c.incomplete for c in find_commands(s))
            # imported: added, and no old row is imported
            assert {"imported_from", "import_key"} <= columns
            assert all(c.imported_from is None for c in find_commands(s))
            assert _indexes(s, "command")["ix_command_session_id"] == ["session_id"]
            assert _indexes(s, "directory") == {"ix_directory_path_hash": ["path_hash"]}
            assert _unique_constraints(s, "directory") == []
            with s.reading() as conn:
                dirs = conn.execute(select(m.Directory.path, m.Directory.path_hash)).all()
                nulls = conn.execute(
                    text("SELECT count(*) FROM write_event WHERE mode IS NULL")
                ).scalar_one()
            assert {bytes(p) for p, _ in dirs} == {b"/w/", b"/usr/lib/", b"/r/"}
            assert all(h == m.path_hash(bytes(p)) for p, h in dirs)
            assert nulls == 6  # the common mode, stored as NULL
            assert _snapshot(s) == before
            assert count(s, m.ReadFile) == 2 + 3  # run.sh and libc.so once
            assert count(s, m.ReadEvent) == 9
            assert [c.id for c in find_commands(s, wfile=target)] == cids
            # The first reader's event id names the read file now.
            archived = Journal(s).archived(min(read_ids))
            assert (archived.data, archived.command_id) == (script, cids[0])
    with Store(db_url) as s:
        # New rows get fresh ids (PostgreSQL: the sequences moved on).
        cid = s.add_command(record(writes=[event(b"/new")], reads=[event(b"/new-read")]))
        [cmd] = find_commands(s, command_id=cid)
        assert cmd.writes[0].id > max(w[0] for c in before for w in c[2])
        assert cmd.reads[0].id > max(read_ids)


def test_upgrade_from_7_adds_the_redaction_table(db_url: str) -> None:
    """The redaction table (schema 10): no rows for old commands; new ones
    counted."""
    with Store(db_url) as s:
        s.add_command(record(text="old"))
        with s.writing() as conn:
            conn.execute(text("DROP TABLE redaction"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=7))
    with Store(db_url, create=False) as s:
        rec = record(text="x [REDACTED:github-token]")
        rec.redactions = {"github-token": 1}
        new = s.add_command(rec)
        with s.reading() as conn:
            version = conn.execute(select(m.SchemaVersion.version)).scalar_one()
            rows = conn.execute(select(m.Redaction.command_id, m.Redaction.kind,
                                       m.Redaction.count)).all()
    assert version == SCHEMA_VERSION
    assert [tuple(r) for r in rows] == [(new, "github-token", 1)]


def test_upgrade_from_6_adds_incomplete(db_url: str) -> None:
    """Schema 7's command.incomplete: old rows complete, new ones as
    recorded."""
    with Store(db_url) as s:
        old = s.add_command(record(text="old"))
        with s.writing() as conn:
            conn.execute(text("ALTER TABLE command DROP COLUMN incomplete"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=6))
    with Store(db_url, create=False) as s:
        rec = record(text="exec bash", return_value=RETURN_VALUE_UNKNOWN)
        rec.incomplete = True
        new = s.add_command(rec)
        got = {c.id: c for c in find_commands(s)}
        with s.reading() as conn:
            version = conn.execute(select(m.SchemaVersion.version)).scalar_one()
    assert version == SCHEMA_VERSION
    assert not got[old].incomplete
    assert got[new].incomplete and not got[new].return_value_known


def test_upgrade_from_7_adds_imported(db_url: str) -> None:
    """command.imported_from and import_key (schema 9): old rows recorded,
    imported ones marked, a key stored once."""
    with Store(db_url) as s:
        old = s.add_command(record(text="old"))
        with s.writing() as conn:
            conn.execute(text("DROP INDEX ix_command_import_key"))
            conn.execute(text("ALTER TABLE command DROP COLUMN import_key"))
            conn.execute(text("ALTER TABLE command DROP COLUMN imported_from"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=7))
    with Store(db_url, create=False) as s:
        rec = record(text="from zsh")
        rec.imported_from, rec.import_key = "zsh", b"k" * 16
        assert s.add_imported([rec, rec]) == (1, 1)
        assert s.add_imported([rec]) == (0, 1)
        got = {c.id: c for c in find_commands(s)}
        with s.reading() as conn:
            version = conn.execute(select(m.SchemaVersion.version)).scalar_one()
        assert "ix_command_import_key" in _indexes(s, "command")
    assert version == SCHEMA_VERSION
    assert got[old].imported_from is None
    assert [c.imported_from for c in got.values() if c.id != old] == ["zsh"]


def test_migrations_are_idempotent(db_url: str) -> None:
    from shournal.store.migrations import split_events

    with Store(db_url) as s:
        s.add_command(record(writes=[event(b"/a")], reads=[event(b"/b")]))
        before = _snapshot(s)
        with s.writing() as conn:
            split_events(conn)
            split_events(conn)
        assert _snapshot(s) == before


def test_directory_hash_collisions_are_harmless(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every directory under one path_hash: lookups compare the paths."""
    from shournal.store import reader

    monkeypatch.setattr(m, "path_hash", lambda path: 42)  # the writer's
    monkeypatch.setattr(reader, "path_hash", lambda path: 42)  # the reader's
    first = store.add_command(record(writes=[event(b"/a/x"), event(b"/b/y")]))
    second = store.add_command(
        record(writes=[event(b"/b/z"), event(b"/c/z")], reads=[event(b"/a/r")])
    )
    assert count(store, m.Directory) == 3
    [cmd] = find_commands(store, command_id=second)
    assert [w.path for w in cmd.writes] == [b"/b/z", b"/c/z"]
    assert [r.path for r in cmd.reads] == [b"/a/r"]
    assert [c.id for c in find_commands(store, parse_criteria(wpath="/b"))] == [first, second]
    assert [c.id for c in find_commands(store, parse_criteria(wpath="/c/"))] == [second]
    assert [c.id for c in find_commands(store, parse_criteria(rpath="/a"))] == [second]


def test_common_mode_is_stored_as_null(store: Store) -> None:
    def ev(path: bytes, mode: int) -> FileEvent:
        return FileEvent(path=path, size=10, mtime_ns=T0, mode=mode, hash=1)

    modes = [0o100644, 0o100755, 0o100600, 0o100644]
    writes = [ev(b"/w/%d" % i, mode) for i, mode in enumerate(modes)]
    reads = [ev(b"/r/%d" % i, mode) for i, mode in enumerate(modes)]
    cid = store.add_command(record(writes=writes, reads=reads))
    # The same read versions again: found, not stored twice.
    again = store.add_command(record(reads=reads))
    assert count(store, m.ReadFile) == 4
    [cmd] = find_commands(store, command_id=cid)
    assert [w.mode for w in cmd.writes] == modes
    assert [r.mode for r in cmd.reads] == modes
    [cmd2] = find_commands(store, command_id=again)
    assert [r.id for r in cmd2.reads] == [r.id for r in cmd.reads]
    with store.reading() as conn:
        for table in ("write_event", "read_file"):
            raw = conn.execute(text(f"SELECT mode FROM {table} ORDER BY id")).scalars().all()
            assert raw == [None, 0o100755, 0o100600, None]


def test_store_paths_are_exact(store: Store) -> None:
    paths = [b"/", b"/a", b"//double//slash/", b"/a/b/", b"noslash", b"/x/\n\x1b[31m"]
    cid = store.add_command(record(writes=[event(p) for p in paths]))
    [cmd] = find_commands(store, command_id=cid)
    assert [w.path for w in cmd.writes] == paths


def test_which_journal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An explicit URL, else $SHOURNAL_DB_URL, else [store] url, else None
    (the default file); Store itself reads neither."""
    from shournal.location import resolve_url

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("SHOURNAL_DB_URL", "sqlite:////tmp/x.sqlite")
    assert resolve_url("sqlite:////tmp/y.sqlite") == "sqlite:////tmp/y.sqlite"
    assert resolve_url() == "sqlite:////tmp/x.sqlite"
    monkeypatch.delenv("SHOURNAL_DB_URL")
    assert resolve_url() is None
    assert not (tmp_path / "shournal").exists()  # reading the config creates nothing
    (tmp_path / "shournal").mkdir()
    (tmp_path / "shournal" / "config.toml").write_text('[store]\nurl = "sqlite:////tmp/z"\n')
    assert resolve_url() == "sqlite:////tmp/z"
    (tmp_path / "shournal" / "config.toml").write_text("[store]\nurl = 5\n")
    with pytest.raises(StoreUnavailable, match="cannot tell which journal"):
        resolve_url()


def test_os_error_message_is_one_line(tmp_path: Path) -> None:
    blocked = tmp_path / "ro"
    blocked.mkdir()
    blocked.chmod(0o500)
    if os.access(blocked, os.W_OK):  # root ignores permissions
        pytest.skip("running with permission override")
    with pytest.raises(StoreUnavailable) as info:
        Store(sqlite_url(blocked / "j.sqlite"))
    assert "\n" not in str(info.value)


def test_paths_and_hashes_round_trip_property(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    paths = st.binary(min_size=1, max_size=60).filter(lambda p: b"\x00" not in p)
    hashes = st.none() | st.integers(min_value=0, max_value=2**64 - 1)
    with Store(sqlite_url(tmp_path / "j.sqlite")) as s:

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.lists(st.tuples(paths, hashes), min_size=1, max_size=8))
        def check(items: list[tuple[bytes, int | None]]) -> None:
            writes = [event(p, hash=h) for p, h in items]
            cid = s.add_command(record(writes=writes))
            [cmd] = find_commands(s, command_id=cid)
            assert [(w.path, w.hash) for w in cmd.writes] == items

        check()
