"""Imported command lines and scripts are redacted as recorded ones are."""

from __future__ import annotations

from shournal.importers import redacted
from shournal.record import CommandRecord, FileEvent
from shournal.redact import builtin, marker

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _rec(text: str, script: bytes | None = None) -> CommandRecord:
    reads = [] if script is None else [FileEvent(b"/w/run.sh", len(script), 1, 0o100644, 7,
                                                 content=script)]
    return CommandRecord(text=text, return_value=0, start_ns=1, end_ns=2, working_dir="",
                         username="u", hostname="h", session_uuid=None, hash_chunk_size=None,
                         hash_max_reads=None, reads=reads, imported_from="zsh",
                         import_key=b"k" * 16)  # fmt: skip


def test_secrets_in_imported_lines_and_scripts_become_markers_and_are_counted() -> None:
    line, script, plain = (_rec(f"git push https://x:{TOKEN}@github.com/o/r"),
                           _rec("sh run.sh", f"export GH={TOKEN}\n".encode()), _rec("ls -l"))
    got = redacted([line, script, plain], builtin())
    assert TOKEN not in got[0].text and got[0].redactions
    assert got[0].import_key == line.import_key  # the source's identity is kept
    assert got[1].reads[0].content is not None and TOKEN.encode() not in got[1].reads[0].content
    assert sum(got[1].redactions.values()) == 1
    assert got[2] is plain  # nothing to redact: the record as it was
    assert any(m in got[0].text for m in (marker("github-token"), marker("url-password")))
