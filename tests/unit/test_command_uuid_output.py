"""A command's UUID in the outputs: JSON (`query --output-format json`,
jsonl) carries it as the usual 8-4-4-4-12 text; human output keeps it out;
a command without one (older, imported) has no such field."""

from __future__ import annotations

import json
import uuid

from test_render import human, readme_command

from shournal.data import uuid_text
from shournal.report.json import render_json

RAW = bytes.fromhex("0f1e2d3c4b5a49788796a5b4c3d2e1f0")


def test_json() -> None:
    [obj] = json.loads(render_json([readme_command(uuid=RAW)]))
    assert obj["uuid"] == "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0" == str(uuid.UUID(bytes=RAW))
    [obj] = json.loads(render_json([readme_command()]))
    assert "uuid" not in obj  # the original's format otherwise


def test_uuid_text_is_the_standard_form() -> None:
    for raw in (bytes(16), b"\xff" * 16, uuid.uuid4().bytes):
        assert uuid_text(raw) == str(uuid.UUID(bytes=raw))


def test_human_output_keeps_it_out() -> None:
    shown = human(readme_command(uuid=RAW))
    assert "0f1e2d3c" not in shown and RAW.hex() not in shown
