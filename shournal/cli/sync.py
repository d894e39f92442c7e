"""``shournal sync``: push the spool to the journal now (a lab server,
docs/lab.md), and say what is left.

Exit statuses: 0 nothing waits; 1 some commands still wait (the push took
longer than --timeout); 3 the journal (the server) cannot be used now --
its cause is printed, the commands stay in the spool and the daemon goes
on retrying.
"""

from __future__ import annotations

from typing import Annotated

import typer

from shournal.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_STORE
from shournal.cli._common import fail

# How long `shournal sync` waits for the push by default.
SYNC_TIMEOUT_SECONDS = 60.0


def sync(
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.0,
                     help="Wait at most this many seconds for the push."),
    ] = SYNC_TIMEOUT_SECONDS,
) -> None:
    from shournal.capture.sync import SyncFailed, push_now
    from shournal.capture.sync_state import when

    try:
        state = push_now(timeout)
    except SyncFailed as exc:
        fail(str(exc), EXIT_STORE)
    print(f"backlog: {state.backlog} command(s)")
    if state.cause is not None:
        print(f"last error: {state.cause} (since {when(state.since)})")
    else:
        print("last error: none")
    print(f"last successful push: {when(state.last_push)}")
    if state.cause is not None:
        raise typer.Exit(EXIT_STORE)
    raise typer.Exit(EXIT_NOT_FOUND if state.backlog else EXIT_OK)
