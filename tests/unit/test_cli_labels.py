"""`shournal note` and `shournal tag` through the real CLI on a real SQLite
journal: setting, showing, clearing, the --tag criterion of query and
history, every output format, and bad input (one line, status 2, nothing
changed).  Both engines: tests/system/test_labels.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic import record
from typer.testing import CliRunner

from shournal.cli import app
from shournal.data import NOTE_MAX_CHARS, TAG_MAX_CHARS, CommandView, check_tag
from shournal.report.history import render_lines
from shournal.report.html import build_payload
from shournal.report.human import render_command
from shournal.report.json import command_object
from shournal.store import Store


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    monkeypatch.setenv("SHOURNAL_DB_URL", url)
    with Store(url) as s:
        for text in ("make fig3", "make fig4", "ls"):
            s.add_command(record(text))
    return url


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def _dump(tmp_path: Path) -> bytes:
    return (tmp_path / "j.sqlite").read_bytes()


def test_note_set_show_clear(env: str) -> None:
    assert cli("note", "1") == (1, "", "shournal: command 1 has no note\n")
    assert cli("note", "1", "the command behind figure 3")[0] == 0
    assert cli("note", "1") == (0, "the command behind figure 3\n", "")
    code, out, _ = cli("query", "--command-id", "1")
    assert code == 0 and "Note: the command behind figure 3" in out
    assert cli("note", "1", "--clear")[0] == 0
    assert cli("note", "1")[0] == 1


def test_tags_add_list_remove_and_find(env: str) -> None:
    assert cli("tag", "1", "fig3", "paper2")[0] == 0
    assert cli("tag", "2", "paper2")[0] == 0
    assert cli("tag", "1") == (0, "fig3\nparper2\n".replace("parper", "paper"), "")
    assert cli("tag") == (0, "     1  fig3\n     2  paper2\n", "")
    code, out, _ = cli("query", "--tag", "paper2", "--output-format", "json")
    assert code == 0
    assert [(c["id"], c.get("tags")) for c in json.loads(out)] == [
        (1, ["fig3", "paper2"]), (2, ["paper2"])]  # fmt: skip
    code, out, _ = cli("query", "--tag", "paper2", "--tag", "fig3", "--output-format", "jsonl")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1]
    code, out, _ = cli("history", "--tag", "fig3", "--format", "{id}|{tags}|{note}")
    assert (code, out) == (0, "1|fig3 paper2|\n")
    assert cli("query", "--tag", "nosuch")[0] == 1
    assert cli("tag", "1", "--remove", "fig3")[0] == 0
    assert cli("tag", "1") == (0, "paper2\n", "")
    # the last command of a tag gone: the tag is gone
    assert cli("tag") == (0, "     2  paper2\n", "")


@pytest.mark.parametrize(
    "args, message",
    [
        (("note", "99", "x"), "no command with id 99"),
        (("tag", "99", "x"), "no command with id 99"),
        (("tag", "1", ""), "a tag cannot be empty"),
        (("tag", "1", "two words"), "a tag is one word"),
        (("tag", "1", "ok", "bad\x1b[31m"), "a tag is one word"),
        (("tag", "1", "x" * (TAG_MAX_CHARS + 1)), "too long"),
        (("note", "1", "   "), "a note cannot be empty"),
        (("note", "1", "a\x07b"), "control characters"),
        (("note", "1", "x" * (NOTE_MAX_CHARS + 1)), "too long"),
        (("note", "1", "x", "--clear"), "--clear takes no TEXT"),
        (("tag", "1", "--remove"), "--remove needs"),
        (("query", "--tag", "a b"), "a tag is one word"),
        (("history", "--tag", ""), "a tag cannot be empty"),
    ],
)
def test_bad_input_is_one_line_status_2_and_changes_nothing(
    env: str, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    before = _dump(tmp_path)
    code, out, err = cli(*args)
    assert code == 2, err
    assert err.startswith("shournal: ") and err.count("\n") == 1 and message in err
    assert "\x1b" not in err and "\x07" not in err
    assert _dump(tmp_path) == before


def test_the_read_only_door_refuses(env: str, tmp_path: Path) -> None:
    """Journal.open(read_only=True): refused before any write (the CLI on
    a journal it cannot write: tests/system/test_labels.py)."""
    from shournal.errors import StoreReadOnly
    from shournal.journal import Journal

    before = _dump(tmp_path)
    with Journal.open(env, read_only=True) as j:
        for write in (lambda: j.set_note(1, "x"), lambda: j.add_tags(1, ["x"])):
            with pytest.raises(StoreReadOnly, match="read-only"):
                write()
    assert _dump(tmp_path) == before


def test_check_tag_accepts_words() -> None:
    for tag in ("fig3", "paper-2", "run:v2", "über", "x" * TAG_MAX_CHARS):
        assert check_tag(tag) == tag


def _view(**kw: object) -> CommandView:
    from datetime import UTC, datetime

    t = datetime(2026, 1, 1, tzinfo=UTC)
    values: dict[str, object] = dict(
        id=7, text="make", return_value=0, start_time=t, end_time=t, working_dir="/w",
        username="u", hostname="h", session_uuid=None, hash_chunk_size=None,
        hash_max_reads=None,
    )  # fmt: skip
    values.update(kw)
    return CommandView(**values)  # type: ignore[arg-type]


HOSTILE = "</script><b>x</b>\x1b]0;pwned\x07"


def test_untrusted_notes_and_tags_are_printable_or_escaped() -> None:
    cmd = _view(note=HOSTILE + "\nsecond", tags=["fig\u202e3"])
    human = "\n".join(render_command(cmd, local_hostname="h"))
    assert "\x1b" not in human and "\x07" not in human
    assert "Note: " in human and "      second" in human
    line = render_lines([cmd], template="{tags} {note}")
    assert "\x1b" not in line and "\x07" not in line and line.count("\n") == 1
    view = _view(tags=["fig3"])
    own = (view.username, view.hostname)
    assert render_lines([view], width=200, me=own).split("  ")[-1] == "#fig3 make\n"
    # a colleague's: whose before the tags
    other = render_lines([view], width=200, me=("bob", view.hostname))
    assert other.split("  ")[-1] == f"{view.username}@{view.hostname} #fig3 make\n"
    obj = command_object(cmd)
    assert obj["note"] == HOSTILE + "\nsecond" and obj["tags"] == ["fig\u202e3"]
    assert "note" not in command_object(_view()) and "tags" not in command_object(_view())
    payload = build_payload([cmd], title="t", generated_at=None)
    assert payload["commands"][0]["note"].startswith("</script>")  # JSON, escaped when inlined
    from shournal.report.html import render_html

    page = render_html([cmd])
    assert "</script><b>" not in page and "pwned" in page
