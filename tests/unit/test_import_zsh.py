"""The zsh history parser (shournal.importers.zsh).

Several byte strings are atuin's importer test vectors
(https://github.com/atuinsh/atuin, crates/atuin-client/src/import/zsh.rs,
MIT; see tests/data/atuin-history-schema/README.md), the metafied one among
them.  Real files written by a real zsh are imported in
tests/system/test_import.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shournal.importers import ImportFailed, read_history
from shournal.importers.zsh import parse, unmetafy

BITROT = "cargo :b̷i̶t̴r̵o̴t̴ ̵i̷s̴ ̷r̶e̵a̸l̷"


@pytest.mark.parametrize(
    ("line", "text", "start", "duration"),
    [
        (": 1613322469:0;cargo install atuin", "cargo install atuin", 1613322469, 0),
        (": 1613322469:10;cargo install atuin;cargo update", "cargo install atuin;cargo update",
         1613322469, 10),
        (f": 1613322469:10;{BITROT}", BITROT, 1613322469, 10),
        (": 1613322469:10;cargo install \\n atuin", "cargo install \\n atuin", 1613322469, 10),
        # not extended: a bare command line
        (": not-extended", ": not-extended", None, None),
        (": 1613322469:0", ": 1613322469:0", None, None),
    ],
)
def test_atuin_extended_vectors(line: str, text: str, start: int | None,
                                duration: int | None) -> None:
    [entry] = parse(line.encode())
    assert (entry.text.decode(), entry.start_s, entry.duration_s) == (text, start, duration)


def test_atuin_file_vector_continued_lines() -> None:
    data = (": 1613322469:0;cargo install atuin\n"
            ": 1613322469:10;cargo install atuin; \\\\\ncargo update\n"
            f": 1613322469:10;{BITROT}\n").encode()
    assert [e.text.decode() for e in parse(data)] == [
        "cargo install atuin", "cargo install atuin; \\\ncargo update", BITROT
    ]


def test_atuin_metafied_vector() -> None:
    data = b"echo \xe4\xbd\x83\x80\xe5\xa5\xbd\nls ~/\xe9\x83\xbf\xb3\xe4\xb9\x83\xb0\n"
    assert [e.text.decode() for e in parse(data)] == ["echo 你好", "ls ~/音乐"]


def test_unmetafy() -> None:
    assert unmetafy(b"a\x83\x80b") == b"a\xa0b"
    assert unmetafy(b"plain") == b"plain"
    assert unmetafy(b"cut\x83") == b"cut"


def test_records_times_durations_and_kept_bytes(tmp_path: Path) -> None:
    path = tmp_path / "zh"
    path.write_bytes(b": 1700000000:3;for i in 1 2; do\\\necho $i\\\ndone\n"
                     b": 1700000010:0;echo \xff bad\nbare line\n")
    records = read_history("zsh", path).records
    assert [r.text for r in records] == [
        "for i in 1 2; do\necho $i\ndone", "echo \\xff bad", "bare line"
    ]
    assert records[0].end_ns - records[0].start_ns == 3 * 10**9
    # an entry without a time just after the one before it
    assert records[2].start_ns > records[1].start_ns == 1700000010 * 10**9
    assert {r.imported_from for r in records} == {"zsh"}


def test_out_of_range_times_are_no_time() -> None:
    [entry] = parse(b": 999999999999999:0;echo hello\n")
    assert entry.text == b"echo hello"
    from shournal.importers.entries import to_records

    [rec] = to_records("zsh", [entry], 10**18)
    assert rec.start_ns < 10**18  # placed before the file's time, not at year 31 million


def test_a_bash_history_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(b"#1700000000\nls\n#1700000001\npwd\n")
    with pytest.raises(ImportFailed, match="not a zsh history: a bash history"):
        read_history("zsh", path)


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from shournal.importers import default_path

    monkeypatch.delenv("HISTFILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_path("zsh") == tmp_path / ".zsh_history"
    (tmp_path / ".histfile").write_bytes(b"ls\n")
    assert default_path("zsh") == tmp_path / ".histfile"
    monkeypatch.setenv("HISTFILE", str(tmp_path / "my.zsh_history"))
    assert default_path("zsh") == tmp_path / "my.zsh_history"
