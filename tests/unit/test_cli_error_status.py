"""shournal.cli.error_status: the one place an exception becomes one
`shournal:` line and its documented status (the README's table), and
main() using it for errors no command caught."""

from __future__ import annotations

import errno
import re
import sys
from pathlib import Path

import pytest

import shournal.cli as cli
from shournal.cli import error_status
from shournal.config import ConfigError
from shournal.data import CriteriaError
from shournal.errors import (
    ConfigUnusable,
    SchemaTooNew,
    StoreCorrupt,
    StoreMissing,
    StoreUnavailable,
)
from shournal.restore import NotArchived, RestoreError


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (CriteriaError("--exit-code: bad"), 2),
        (StoreMissing("no journal"), 1),
        (StoreUnavailable("locked"), 3),
        (StoreCorrupt("not a database"), 3),
        (SchemaTooNew("newer"), 3),
        (ConfigUnusable("cannot tell which journal to use: x"), 4),
        (ConfigError("unknown key 'k'", file="/c.toml", line=2), 4),
        (NotArchived("not archived"), 1),
        (RestoreError("cannot restore"), 2),
        (PermissionError(errno.EACCES, "Permission denied", "/ro/x"), 2),
        (IsADirectoryError(errno.EISDIR, "Is a directory", "/d"), 2),
        (KeyboardInterrupt(), 130),
        (TypeError("bug"), 70),
    ],
)
def test_every_error_has_its_status(exc: BaseException, status: int) -> None:
    message, code = error_status(exc)  # type: ignore[misc]
    assert code == status and "\n" not in message


def test_an_os_error_names_its_path() -> None:
    message, _ = error_status(PermissionError(errno.EACCES, "Permission denied", "/ro/x"))
    assert message == "/ro/x: Permission denied"


def test_exits_are_not_errors() -> None:
    assert error_status(SystemExit(0)) is None


def test_every_status_is_in_the_readme_table() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("## Exit statuses", 1)[1].split("\n\n", 3)[2]
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    statuses = {v for k, v in vars(cli).items() if k.startswith("EXIT_")}
    assert statuses <= rows, statuses - rows


@pytest.mark.parametrize(
    ("exc", "status", "line"),
    [
        (ValueError("boom"), 70, "shournal: internal error: ValueError: boom"),
        (ConfigUnusable("cannot tell which journal to use: c.toml:1: bad"), 4,
         "shournal: cannot tell which journal to use: c.toml:1: bad"),
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x\x1b[31m"), 2,
         "shournal: /x\\x1b[31m: No such file or directory"),
    ],
)
def test_main_turns_an_uncaught_error_into_one_line(
    exc: BaseException, status: int, line: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(_fast_query: bool, _direct: bool) -> None:
        raise exc

    monkeypatch.setattr(cli, "_main", broken)
    monkeypatch.setattr(sys, "argv", ["shournal", "stats"])
    monkeypatch.delenv("SHOURNAL_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == status
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err


def test_debug_shows_the_traceback(monkeypatch, capsys) -> None:
    def broken(_fast_query: bool, _direct: bool) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(cli, "_main", broken)
    monkeypatch.setenv("SHOURNAL_DEBUG", "1")
    with pytest.raises(SystemExit):
        cli.main()
    assert "Traceback" in capsys.readouterr().err
