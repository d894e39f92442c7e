"""A recorded command as an experiment: what the journal says of it, and
its apparatus manifest when it was recorded with one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shournal.data import QueryError
from shournal.redact import redact_env
from shournal.store.archive import decode_manifest

if TYPE_CHECKING:
    from shournal.data import CommandView
    from shournal.journal import Journal
    from shournal.store.archive import Contents


class ExperimentError(Exception):
    """A command that cannot be used as asked (one line)."""


@dataclass(slots=True)
class Experiment:
    command: CommandView
    manifest: dict[str, Any] | None  # None: recorded without its apparatus
    # Where the manifest's content is read (Journal.apparatus_content: the
    # journal must stay open while it is used); None: this host's file
    # archive.
    content: Contents | None = None

    def contents(self) -> Contents:
        if self.content is None:
            from shournal.store.archive import Archive

            self.content = Archive()
        return self.content

    def reads(self) -> dict[str, dict[str, Any]]:
        """path -> {size, mtime_ns, mode, hash, digest, why}: the
        manifest's read files (every one), else the journal's."""
        return self._files("reads", self.command.reads)

    def writes(self) -> dict[str, dict[str, Any]]:
        return self._files("writes", self.command.writes)

    def _files(self, key: str, events: list[Any]) -> dict[str, dict[str, Any]]:
        import os

        out: dict[str, dict[str, Any]] = {}
        if self.manifest is not None:
            for path, size, mtime, mode, hsh, digest, why in self.manifest[key]:
                out[path] = {"size": size, "mtime_ns": mtime, "mode": mode, "hash": hsh,
                             "digest": digest, "why": why}
            return out
        for ev in events:
            out[os.fsdecode(ev.path)] = {"size": ev.size, "mtime_ns": ev.mtime_ns,
                                         "mode": ev.mode, "hash": ev.hash, "digest": None,
                                         "why": None}
        return out


def load_manifest(journal: Journal, command_id: int) -> dict[str, Any] | None:
    """The manifest, its environment redacted again by today's default
    rules (shournal.redact): one recorded by an older shournal may hold a
    secret in clear, and every reader and exporter comes through here."""
    raw = journal.apparatus_manifest(command_id)
    if raw is None:
        return None
    man = decode_manifest(raw)
    env = man.get("env")
    if isinstance(env, dict):
        man["env"], _ = redact_env(env)
    return man


def load(journal: Journal, command_id: int) -> Experiment:
    found = journal.find(command_id=command_id)
    if not found:
        raise ExperimentError(f"no command with id {command_id}")
    return Experiment(found[0], load_manifest(journal, command_id), journal.apparatus_content())


def load_by_file(journal: Journal, path: str) -> Experiment:
    """The (newest) command that wrote the file at ``path`` (--wfile)."""
    try:
        found = journal.find(wfile=path, history=1, max_files=0)
    except QueryError as exc:
        raise ExperimentError(str(exc)) from None
    if not found:
        raise ExperimentError(f"no recorded command wrote {path}")
    return load(journal, found[-1].id)
