"""Reproducing experiments (after Rex: record, replay, expdiff): a
command's apparatus -- every file it read, with its content, the digests
of what it wrote, its environment -- archived so that the command can be
replayed in a sandbox or compared with another one.

Nothing here is imported by the recorder unless a command asks for its
apparatus (see :mod:`shournal.reproduce.recording`).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shournal.listener import Collector

# Set by `shournal run --apparatus` in the helper's environment, which the
# listener inherits (never in the command's): a JSON object
# {"umask": int, "argv": [str, ...], "archive_outputs": bool}.
ENV_VAR = "SHOURNAL_APPARATUS"


def summary_path(listener_pid: int) -> str:
    """Where the listener leaves its one-line summary for `shournal run`
    (the listener is the helper's process: same pid)."""
    from shournal import _paths

    return str(_paths.runtime_dir() / f"apparatus-{listener_pid}")


def collector(cfg: Any, uid: int, gids: frozenset[int]) -> Collector:
    """The listener's one hook: its Collector, or an ApparatusCollector
    when the command is recorded with its apparatus.  Imports nothing more
    for an ordinary command."""
    if ENV_VAR not in os.environ:
        from shournal.listener import Collector

        return Collector(cfg, uid, gids)
    from shournal.reproduce.recording import apparatus_collector

    return apparatus_collector(cfg, uid, gids)
