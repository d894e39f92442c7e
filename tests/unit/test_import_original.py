"""The importer of the original shournal's database
(shournal.importers.original): its published v2.2 sample (scheme 2.3,
tests/data/original-shournal-v2.2) with the values the original's own test
expects, and a scheme 3.2 database made from the schema facts
(docs of the original: pathtable, empty hashes, sessions)."""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import xxhash
from import_samples import ORIGINAL_V2_2

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import ImportFailed, read_history


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    copy = tmp_path / "shournal"
    shutil.copytree(ORIGINAL_V2_2, copy)
    return copy / "database.db"


def _local_ns(text: str) -> int:
    return round(datetime.fromisoformat(text).astimezone().timestamp() * 1000) * 1_000_000


def test_the_sample_s_expected_values(sample: Path) -> None:
    history = read_history("shournal", sample)
    assert history.notes == []
    one, two, three, four = history.records
    assert [(w.path, w.size) for w in one.writes] == [
        (b"/home/tycho/one", 4), (b"/home/tycho/two", 4)
    ]
    assert [r.path for r in two.reads] == [b"/home/tycho/one", b"/home/tycho/two"]
    assert all(r.content is None for r in two.reads)  # not stored to disk
    assert [w.path for w in three.writes] == [b"/tmp/three", b"/tmp/four"]
    assert [(r.path, r.content) for r in four.reads] == [
        (b"/home/tycho/storeme/script1.sh", b"s1\n"), (b"/home/tycho/storeme/script2.sh", b"s2\n")
    ]
    # the hashes are the partial XXH64 of the content, little-endian blobs
    assert one.writes[0].hash == xxhash.xxh64_intdigest(b"one\n")
    assert four.reads[0].hash == xxhash.xxh64_intdigest(b"s1\n")
    assert four.reads[0].mode == 0o100644
    assert (one.hash_chunk_size, one.hash_max_reads) == (4096, 20)
    assert (one.hostname, one.username, one.session_uuid) == ("tychotest", "tycho", None)
    assert one.text == "sh -c echo one > one; echo two > two" and one.working_dir == "/home/tycho"
    assert one.start_ns == _local_ns("2021-01-25T20:23:02.378")
    assert one.end_ns == _local_ns("2021-01-25T20:23:02.398")
    assert one.writes[0].mtime_ns == _local_ns("2021-01-25T20:23:02")
    assert {r.imported_from for r in history.records} == {"shournal"}
    assert len({r.import_key for r in history.records}) == 4


def test_a_missing_stored_file_is_told_and_the_rest_imported(sample: Path) -> None:
    (sample.parent / "readFiles" / "4").unlink()
    history = read_history("shournal", sample)
    assert len(history.notes) == 1 and "script2.sh" in history.notes[0]
    assert history.records[3].reads[1].content is None
    assert history.records[3].reads[0].content == b"s1\n"


def test_a_newer_scheme_is_refused(sample: Path) -> None:
    conn = sqlite3.connect(sample)
    conn.execute("UPDATE version SET ver = '3.3'")
    conn.commit()
    conn.close()
    newer = r"scheme version 3.3 is newer than this import knows \(3.2\)"
    with pytest.raises(ImportFailed, match=newer):
        read_history("shournal", sample)


def test_a_truncated_database_is_refused(sample: Path) -> None:
    data = sample.read_bytes()
    sample.write_bytes(data[: len(data) // 3])
    with pytest.raises(ImportFailed, match="damaged a database of the original shournal"):
        read_history("shournal", sample)


def test_another_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "database.db"
    sqlite3.connect(db).execute("CREATE TABLE cmd (id INTEGER)").connection.close()
    with pytest.raises(ImportFailed, match="not a database of the original shournal: no table"):
        read_history("shournal", db)


def make_scheme_3_2(path: Path) -> Path:
    """A database in the layout of scheme 3.2 (pathtable, hash '' for none,
    sessions, an unknown return value), from the original's schema facts."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE version (id INTEGER PRIMARY KEY, ver TEXT NOT NULL);
        CREATE TABLE env (id INTEGER PRIMARY KEY, username TEXT NOT NULL, hostname TEXT NOT NULL,
                          UNIQUE (username, hostname));
        CREATE TABLE hashmeta (id INTEGER PRIMARY KEY, chunkSize INTEGER NOT NULL,
                               maxCountOfReads INTEGER NOT NULL,
                               UNIQUE (chunkSize, maxCountOfReads));
        CREATE TABLE session (id BLOB PRIMARY KEY, comment TEXT);
        CREATE TABLE cmd (id INTEGER PRIMARY KEY, sessionId BLOB REFERENCES session (id),
                          envId INTEGER NOT NULL, hashmetaId INTEGER, txt TEXT NOT NULL,
                          returnVal INTEGER NOT NULL, startTime timestamp NOT NULL,
                          endTime timestamp NOT NULL, workingDirectory TEXT NOT NULL);
        CREATE TABLE pathtable (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
        CREATE TABLE writtenFile (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
                                  pathId INTEGER NOT NULL, cmdId INTEGER NOT NULL,
                                  mtime timestamp NOT NULL, size INTEGER NOT NULL, hash BLOB);
        CREATE TABLE readFile (id INTEGER PRIMARY KEY, envId INTEGER NOT NULL, name TEXT NOT NULL,
                               pathId INTEGER NOT NULL, mtime timestamp NOT NULL,
                               size INTEGER NOT NULL, mode BLOB NOT NULL, hash BLOB,
                               hashmetaId INTEGER, isStoredToDisk INTEGER DEFAULT 1);
        CREATE TABLE readFileCmd (id INTEGER PRIMARY KEY, cmdId INTEGER NOT NULL,
                                  readFileId INTEGER, UNIQUE (cmdId, readFileId));
        INSERT INTO version VALUES (1, '3.2');
        INSERT INTO env VALUES (1, 'ada', 'lab1');
        INSERT INTO hashmeta VALUES (1, 256, 3);
        INSERT INTO pathtable VALUES (1, '/home/ada/paper');
    """)
    session = uuid.UUID("a0b1c2d3-e4f5-11ee-8000-000000000001").bytes
    conn.execute("INSERT INTO session VALUES (?, NULL)", (session,))
    conn.execute("INSERT INTO cmd VALUES (1, ?, 1, 1, './run.sh > out.txt', 2147483647, "
                 "'2024-05-01T12:00:00.000', '2024-05-01T12:00:01.500', '/home/ada/paper')",
                 (session,))
    conn.execute("INSERT INTO writtenFile VALUES (1, 'out.txt', 1, 1, '2024-05-01T12:00:01', 0, ?)",
                 (b"",))
    conn.execute("INSERT INTO readFile VALUES "
                 "(1, 1, 'run.sh', 1, '2024-04-30T08:00:00', 7, ?, ?, 1, 0)",
                 ((0o100755).to_bytes(4, "little"), (12345).to_bytes(8, "little")))
    conn.execute("INSERT INTO readFileCmd VALUES (1, 1, 1)")
    conn.commit()
    conn.close()
    return path


def test_scheme_3_2(tmp_path: Path) -> None:
    [rec] = read_history("shournal", make_scheme_3_2(tmp_path / "database.db")).records
    assert rec.return_value == RETURN_VALUE_UNKNOWN
    assert rec.session_uuid == uuid.UUID("a0b1c2d3-e4f5-11ee-8000-000000000001").bytes
    assert [(w.path, w.size, w.hash) for w in rec.writes] == [(b"/home/ada/paper/out.txt", 0, None)]
    assert [(r.path, r.mode, r.hash) for r in rec.reads] == [
        (b"/home/ada/paper/run.sh", 0o100755, 12345)
    ]
    assert rec.end_ns - rec.start_ns == 1_500_000_000
