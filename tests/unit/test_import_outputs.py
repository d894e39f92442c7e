"""An imported command says so in every output: human (`query`), JSON
(`query`, `history`), and the `{imported}` field of `history --format`;
a recorded one says nothing of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from test_render import human, readme_command

from shournal.report.history import fields
from shournal.report.json import render_json


def test_human() -> None:
    assert "Imported from a zsh history (shournal import)" in human(
        readme_command(imported_from="zsh"))
    assert "Imported" not in human(readme_command())


def test_json() -> None:
    [obj] = json.loads(render_json([readme_command(imported_from="atuin")]))
    assert obj["importedFrom"] == "atuin"
    [obj] = json.loads(render_json([readme_command()]))
    assert "importedFrom" not in obj  # the original's format otherwise


def test_history_field() -> None:
    now = datetime.now(UTC)
    assert fields(readme_command(imported_from="bash"), now, absolute=True,
                  home=None)["imported"] == "bash"
    assert fields(readme_command(), now, absolute=True, home=None)["imported"] == ""
