"""``shournal redact``: today's secret patterns (the built-in ones and the
config's ``[redact] patterns``) applied to what the journal holds already:
command lines, archived scripts, the environments and argv of apparatus
manifests.  What is replaced is counted with its command, as on the way in.

Exit statuses: 0 done (with --dry-run: nothing changed), 1 no journal yet,
3 the journal cannot be used, 4 the config is invalid.  Nothing changes on
any error (one transaction); a second run changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from shournal.cli._common import errors_to_status, open_journal, write

if TYPE_CHECKING:
    from shournal.data import Part, RedactResult


def _part(name: str, part: Part, rows: str) -> str:
    if not part.changed:
        return f"{name}: nothing to redact"
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(part.counts.items()))
    return f"{name}: {part.changed} {rows}{'' if part.changed == 1 else 's'} ({kinds})"


def render(result: RedactResult) -> str:
    lines = [
        _part("command lines", result.commands, "command"),
        _part("archived scripts", result.scripts, "script"),
        _part("environments", result.environments, "apparatus manifest"),
    ]
    n = result.total
    secrets = f"{n} secret{'' if n == 1 else 's'}"
    if result.dry_run:
        lines.append(f"would redact {secrets} (dry run: nothing changed)")
    else:
        lines.append(f"redacted {secrets}")
    return "\n".join(lines) + "\n"


def redact(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only say what would be redacted.")
    ] = False,
) -> None:
    """Apply the current secret patterns to everything already stored."""
    from shournal import redact as rules
    from shournal.config import load_config

    cfg = load_config(create=False)  # (ConfigError: status 4, before anything is opened)
    patterns = rules.patterns_for(cfg.redact.patterns)
    names = cfg.apparatus.secret_env_names
    with errors_to_status("nothing to redact: "):
        journal = open_journal(read_only=dry_run)
        with journal:
            result = journal.redact(patterns, secret_env_names=names, dry_run=dry_run)
    write(render(result))
