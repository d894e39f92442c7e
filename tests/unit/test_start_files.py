"""Command lines' starts on disk (shournal.capture.spool, the format of
struct shournal_start_file): read back, and stored once from their start
when their recorder is gone -- not while it runs, not twice, not when the
line is stored already, not while the daemon's spool holds unstored lines."""

from __future__ import annotations

import os
import struct
import subprocess
import zlib
from pathlib import Path

from shournal.capture import protocol
from shournal.capture import spool as sp
from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.record import CommandRecord

SESSION = bytes(range(16))
UUID = bytes(range(16, 32))


def _starttime(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def write_start(base: Path, text: bytes, start_ns: int, *, holder: tuple[int, int],
                listener: tuple[int, int], cwd: bytes = b"/work", fmt: int = 2) -> Path:
    """A start file as write_start_file in native/preload/start.c
    makes it (`fmt` 1: as an older one did, without the UUID)."""
    head = (fmt, holder[0], listener[0], len(cwd), holder[1], listener[1], start_ns, SESSION)
    if fmt == protocol.START_FORMAT:
        payload = protocol.START_FILE.pack(*head, UUID) + cwd + text
    else:
        payload = protocol.START_FILE_1.pack(*head) + cwd + text
    head = struct.pack("=I", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    d = sp.starts_dir(base)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = d / sp.start_name(listener[0], SESSION, start_ns)
    path.write_bytes(b"SHSP" + head + struct.pack("=I", crc) + payload)
    return path


class FakeStore:
    def __init__(self) -> None:
        self.recs: list[CommandRecord] = []

    def has_command(self, rec: CommandRecord) -> bool:
        return any(
            (r.start_ns, r.text, r.working_dir, r.session_uuid)
            == (rec.start_ns, rec.text, rec.working_dir, rec.session_uuid)
            for r in self.recs
        )

    def add_command(self, rec: CommandRecord) -> int:
        self.recs.append(rec)
        return len(self.recs)


def _recover(store: FakeStore, base: Path, warned: list[str]) -> int:
    return sp.recover_starts(
        store, "u", "h", lambda text: None if text.startswith("ignored") else (text, {}),
        lambda start, msg: warned.append(f"{msg}: {start.text.decode()}"), base,
    )  # fmt: skip


def test_read_back(tmp_path):
    me = (os.getpid(), _starttime(os.getpid()))
    path = write_start(tmp_path, "echo ü".encode(), 123, holder=me, listener=me)
    start = sp.read_start(path)
    assert start is not None
    assert (start.text, start.cwd, start.start_ns, start.session) == (
        "echo ü".encode(), "/work", 123, SESSION)
    assert start.uuid == UUID
    assert sp.find_start(os.getpid(), tmp_path) == (path, start)
    # torn (a power loss before the kernel wrote it back)
    path.write_bytes(path.read_bytes()[:-1])
    assert sp.read_start(path) is None


def test_stored_once_when_the_recorder_is_gone(tmp_path):
    dead = (_dead_pid(), 0)
    me = (os.getpid(), _starttime(os.getpid()))
    reused = (os.getpid(), _starttime(os.getpid()) + 1)  # a later process, same pid
    gone = write_start(tmp_path, b"sleep 30", 100, holder=dead, listener=dead)
    running = write_start(tmp_path, b"make", 200, holder=dead, listener=me)
    ignored = write_start(tmp_path, b"ignored x", 300, holder=dead, listener=reused)
    was_reused = write_start(tmp_path, b"ls", 400, holder=reused, listener=dead)
    store, warned = FakeStore(), []
    assert _recover(store, tmp_path, warned) == 2
    assert [r.text for r in store.recs] == ["sleep 30", "ls"]
    rec = store.recs[0]
    assert rec.incomplete and rec.return_value == RETURN_VALUE_UNKNOWN
    assert rec.lost_reasons == {"relay": 1} and rec.lost_events == 1
    assert (rec.working_dir, rec.session_uuid, rec.start_ns) == ("/work", SESSION, 100)
    assert rec.uuid == UUID  # the one the finished record would have carried
    assert len(warned) == 2 and warned[0].endswith(": sleep 30"), warned
    assert running.exists()
    assert not gone.exists() and not ignored.exists() and not was_reused.exists()
    assert _recover(store, tmp_path, warned) == 0
    assert len(store.recs) == 2


def test_a_start_of_an_older_preload_library_is_read_without_uuid(tmp_path):
    dead = (_dead_pid(), 0)
    path = write_start(tmp_path, b"make", 7, holder=dead, listener=dead, fmt=1)
    start = sp.read_start(path)
    assert start is not None and (start.text, start.cwd, start.start_ns) == (b"make", "/work", 7)
    assert start.uuid == bytes(16)
    store = FakeStore()
    assert _recover(store, tmp_path, []) == 1
    assert store.recs[0].uuid is None and store.recs[0].text == "make"


def test_not_stored_twice_nor_before_the_spool_is_drained(tmp_path):
    dead = (_dead_pid(), 0)
    path = write_start(tmp_path, b"true", 100, holder=dead, listener=dead)
    # the daemon's spool holds a line not yet in the journal: wait for it
    spool = sp.Spool(tmp_path)
    spool.append([CommandRecord("x", 0, 1, 1, "/", "u", "h", None, None, None)])
    store = FakeStore()
    assert _recover(store, tmp_path, []) == 0 and path.exists()
    spool.commit(spool.end)
    spool.close()
    # stored already (its recorder was killed after storing it): only removed
    store.recs.append(CommandRecord("true", 0, 100, 200, "/work", "u", "h", SESSION, None, None))
    assert _recover(store, tmp_path, []) == 0
    assert not path.exists() and len(store.recs) == 1


def test_stale_temporary_and_torn_files_are_removed(tmp_path):
    dead = _dead_pid()
    d = sp.starts_dir(tmp_path)
    d.mkdir(parents=True)
    tmp = d / ".1-x-1"
    tmp.write_bytes(b"SH")
    os.utime(tmp, (0, 0))
    fresh = d / ".2-x-2"
    fresh.write_bytes(b"SH")
    torn = d / f"{dead}-{SESSION.hex()}-5"
    torn.write_bytes(b"SHSP\0")
    assert sp.orphaned_starts(tmp_path) == []
    assert sorted(p.name for p in d.iterdir()) == [".2-x-2"]


def test_a_line_the_daemon_reads_now_is_not_recovered(tmp_path):
    """Its forwarder may be gone (killed) while the daemon still reads the
    line, which it then stores itself."""
    dead = (_dead_pid(), 0)
    path = write_start(tmp_path, b"make", 100, holder=dead, listener=dead)
    store = FakeStore()
    assert sp.recover_starts(store, "u", "h", lambda t: (t, {}), lambda s, m: None, tmp_path,
                             busy={dead[0]}) == 0  # fmt: skip
    assert path.exists() and store.recs == []


def test_a_recovered_line_passes_the_capture_gate(tmp_path):
    """The start of a killed recorder is stored through listener.admit:
    redacted and counted like any other line."""
    from shournal.capture.listener import admit
    from shournal.config import Config

    dead = (_dead_pid(), 0)
    write_start(tmp_path, b"mysql -uroot -pS3cret shop", 100, holder=dead, listener=dead)
    store = FakeStore()
    assert sp.recover_starts(store, "u", "h", lambda t: admit(Config(), t),
                             lambda s, m: None, tmp_path) == 1  # fmt: skip
    assert store.recs[0].text == "mysql -uroot -p[REDACTED:password] shop"
    assert store.recs[0].redactions == {"password": 1}
