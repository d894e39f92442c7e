"""The bash history parser (shournal.importers.bash).

Some byte strings are atuin's importer test vectors
(https://github.com/atuinsh/atuin, crates/atuin-client/src/import/bash.rs,
MIT; see tests/data/atuin-history-schema/README.md).  Real files written by
a real bash are imported in tests/system/test_import.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shournal.data import RETURN_VALUE_UNKNOWN
from shournal.importers import ImportFailed, read_history
from shournal.importers.bash import parse
from shournal.importers.entries import STEP_NS


def _texts(data: bytes) -> list[bytes]:
    return [e.text for e in parse(data)]


def test_atuin_vector_without_timestamps() -> None:
    data = "cargo install atuin\ncargo update\ncargo :b̷i̶t̴r̵o̴t̴ ̵i̷s̴ ̷r̶e̵a̸l̷\n".encode()
    assert _texts(data) == [
        b"cargo install atuin", b"cargo update", "cargo :b̷i̶t̴r̵o̴t̴ ̵i̷s̴ ̷r̶e̵a̸l̷".encode()
    ]


def test_atuin_vector_with_timestamps() -> None:
    entries = parse(b"#1672918999\ngit reset\n#1672919006\ngit clean -dxf\n#1672919020\ncd ../\n")
    assert [(e.text, e.start_s) for e in entries] == [
        (b"git reset", 1672918999), (b"git clean -dxf", 1672919006), (b"cd ../", 1672919020)
    ]


def test_atuin_vector_with_partial_timestamps() -> None:
    """atuin reads every line as an entry; bash writes a timestamp line
    before every entry once HISTTIMEFORMAT is set, so the lines after one
    up to the next are one entry (multi-line, kept whole), and a line before
    the first timestamp is an entry of its own."""
    entries = parse(b"git reset\n#1672919006\ngit clean -dxf\ncd ../\n")
    assert [(e.text, e.start_s) for e in entries] == [
        (b"git reset", None), (b"git clean -dxf\ncd ../", 1672919006)
    ]


def test_multi_line_entry_and_non_utf8_bytes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(b"#1700000000\nfor i in 1 2; do\n  echo $i\ndone\n#1700000005\n"
                     b"echo \xff\xfe\n#1700000009\necho \xe4\xbd\xa0\xe5\xa5\xbd\n")
    records = read_history("bash", path).records
    assert [r.text for r in records] == [
        "for i in 1 2; do\n  echo $i\ndone", "echo \\xff\\xfe", "echo 你好"
    ]
    starts = [s * 10**9 for s in (1700000000, 1700000005, 1700000009)]
    assert [r.start_ns for r in records] == starts
    assert all(r.imported_from == "bash" and r.import_key for r in records)
    assert all(r.return_value == RETURN_VALUE_UNKNOWN and not r.writes for r in records)
    assert len({r.import_key for r in records}) == 3


def test_untimed_entries_end_before_the_file_s_last_change_in_order(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(b"ls\nls\ncd /\n")
    os.utime(path, ns=(1_600_000_000 * 10**9, 1_600_000_000 * 10**9))
    records = read_history("bash", path).records
    assert [r.start_ns for r in records] == [1_600_000_000 * 10**9 - k * STEP_NS for k in (3, 2, 1)]
    # the two `ls` are two entries, told apart by their count only
    assert records[0].import_key != records[1].import_key


def test_identity_does_not_depend_on_the_file_or_its_time(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"#1700000000\nmake\n#1700000001\nmake\n")
    b.write_bytes(b"#1700000000\nmake\n#1700000001\nmake\n#1700000002\nmake test\n")
    os.utime(b, ns=(1, 1))
    keys_a = [r.import_key for r in read_history("bash", a).records]
    keys_b = [r.import_key for r in read_history("bash", b).records]
    assert keys_b[:2] == keys_a and keys_b[2] not in keys_a


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b": 1700000000:0;ls\n: 1700000001:0;pwd\n", "zsh extended history"),
        (b"SQLite format 3\x00rest", "binary data"),
        (b"ls\x00\n", "binary data"),
    ],
)
def test_another_format_is_refused_in_one_line(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "h"
    path.write_bytes(data)
    with pytest.raises(ImportFailed) as e:
        read_history("bash", path)
    assert str(e.value).startswith(f"{path}: not a bash history") and reason in str(e.value)
    assert "\n" not in str(e.value)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match="no such file"):
        read_history("bash", tmp_path / "none")


def test_default_path_follows_histfile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from shournal.importers import default_path

    monkeypatch.setenv("HISTFILE", str(tmp_path / "hist"))
    assert default_path("bash") == tmp_path / "hist"
    monkeypatch.delenv("HISTFILE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_path("bash") == tmp_path / ".bash_history"
