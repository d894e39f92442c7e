"""The lineage of a file: from a file version back to everything that made it.

The walk (no SQL here: it asks :class:`~shournal.provenance.readers.JournalReader`):

1. A target is the version of a file on disk (its size, mtime and partial
   hash under every hash setting in the journal), or the version one
   given command wrote to it.
2. A file version's writer is found by content, never by name, with the
   rules of ``query --wfile`` (:func:`choose_writer`): size + hash, and a
   write with the same mtime (a move keeps it), else by a command whose
   run covers the version's mtime (within 2 s of clock tolerance); so
   moves and renames are followed, and a version made by an unrecorded
   ``cp`` of a recorded file is a leaf, written outside the journal.  Of several
   commands that wrote the same content, the writer is the one that
   finished last before the reader started (the target has no reader:
   the last one that finished).  A command is never its own writer, so a
   command that read and rewrote a file (``sed -i f``) read the version
   before it.  How many other commands wrote that content is kept on the
   edge.
3. The versions the writer read are looked up the same way, breadth
   first, until versions no recorded command wrote (the leaves), or the
   depth limit.  Writers must finish before their readers start, so the
   graph has no cycles; every command and file version is one node.

A read of a version the same command wrote itself (a temporary file read
back) is not an input and not followed.
"""

from __future__ import annotations

import os
from collections import deque

from shournal.data import (
    CommandView,
    FileEventView,
    QueryError,
    _FrozenValue,
    _Value,
    possible_writers,
)

# Not typing.TYPE_CHECKING: typing (and dataclasses) cost `shournal lineage`
# and `status` their start-up (bench/cli_startup.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime
    from typing import Literal

    from shournal.provenance.readers import JournalReader, WrittenVersion


class LineageError(QueryError):
    """A lineage cannot be built as asked (one-line message)."""


# (path, size, mtime_ns, hash): one version of one file.
VersionKey = tuple[bytes, int, int, int | None]


class FileNode(_Value):
    """One version of a file in the lineage."""

    __slots__ = (
        "id", "path", "size", "mtime_ns", "hash", "event", "hash_chunk_size", "hash_max_reads",
        "leaf", "content_writers", "truncated", "target",
    )  # fmt: skip
    id: str  # "f1", "f2"... in the order the walk found them
    path: bytes  # absolute; where it was read (or is on disk, for a target)
    size: int
    mtime_ns: int
    hash: int | None
    # The read event that recorded this version (first reader found), with
    # its command's hash settings: what ``status`` compares the disk with.
    event: FileEventView | None
    hash_chunk_size: int | None
    hash_max_reads: int | None
    leaf: bool  # no recorded command wrote this version
    # leaf: recorded commands that wrote the same content, none of which
    # can have made this version (an unrecorded copy of their output)
    content_writers: int
    truncated: bool  # not followed: the depth limit
    target: bool

    def __init__(
        self,
        id: str,
        path: bytes,
        size: int,
        mtime_ns: int,
        hash: int | None,
        event: FileEventView | None = None,
        hash_chunk_size: int | None = None,
        hash_max_reads: int | None = None,
        leaf: bool = False,
        content_writers: int = 0,
        truncated: bool = False,
        target: bool = False,
    ) -> None:
        self.id = id
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self.hash = hash
        self.event = event
        self.hash_chunk_size = hash_chunk_size
        self.hash_max_reads = hash_max_reads
        self.leaf = leaf
        self.content_writers = content_writers
        self.truncated = truncated
        self.target = target

    @property
    def key(self) -> VersionKey:
        return (self.path, self.size, self.mtime_ns, self.hash)

    @property
    def archived_id(self) -> int | None:
        """The read file id of an archived version (a script), else None."""
        ev = self.event
        return ev.id if ev is not None and ev.content_id is not None else None


class Edge(_FrozenValue):
    __slots__ = ("kind", "command_id", "file", "written_path", "other_candidates")
    kind: Literal["read", "wrote"]
    command_id: int
    file: str  # FileNode.id
    # wrote: where the command wrote this content when it is not the path
    # it was read from (moved or copied outside the recorded file events)
    written_path: bytes | None
    # wrote: how many other commands wrote the same content
    other_candidates: int

    def __init__(
        self,
        kind: Literal["read", "wrote"],
        command_id: int,
        file: str,
        written_path: bytes | None = None,
        other_candidates: int = 0,
    ) -> None:
        self._init(kind=kind, command_id=command_id, file=file, written_path=written_path,
                   other_candidates=other_candidates)  # fmt: skip


class Lineage(_Value):
    __slots__ = (
        "targets", "commands", "files", "edges", "depth", "max_depth",
        "_writer", "_reads", "_readers", "_written",
    )  # fmt: skip
    targets: list[str]  # FileNode ids
    commands: dict[int, CommandView]
    files: dict[str, FileNode]
    edges: list[Edge]  # in the order found
    depth: dict[int, int]  # command id -> 1 = wrote a target
    max_depth: int | None
    # The edges by end point (kept by add_edge).
    _writer: dict[str, Edge]
    _reads: dict[int, list[str]]
    _readers: dict[str, list[int]]
    _written: dict[int, list[Edge]]

    def __init__(self, max_depth: int | None = None) -> None:
        self.targets = []
        self.commands = {}
        self.files = {}
        self.edges = []
        self.depth = {}
        self.max_depth = max_depth
        self._writer = {}
        self._reads = {}
        self._readers = {}
        self._written = {}

    def add_edge(self, edge: Edge) -> None:
        self.edges.append(edge)
        if edge.kind == "wrote":
            self._writer.setdefault(edge.file, edge)
            self._written.setdefault(edge.command_id, []).append(edge)
        else:
            self._reads.setdefault(edge.command_id, []).append(edge.file)
            self._readers.setdefault(edge.file, []).append(edge.command_id)

    def commands_by_start(self) -> list[CommandView]:
        return sorted(self.commands.values(), key=lambda c: (c.start_time, c.id))

    def writer(self, file_id: str) -> Edge | None:
        """The ``wrote`` edge into a file version (None: a leaf, or not followed)."""
        return self._writer.get(file_id)

    def reads(self, command_id: int) -> list[FileNode]:
        return [self.files[f] for f in self._reads.get(command_id, ())]

    def readers(self, file_id: str) -> list[int]:
        return list(self._readers.get(file_id, ()))

    def written(self, command_id: int) -> list[tuple[FileNode, Edge]]:
        return [(self.files[e.file], e) for e in self._written.get(command_id, ())]


class DiskTarget(_FrozenValue):
    """The version of ``path`` on disk now."""

    __slots__ = ("path",)
    path: str

    def __init__(self, path: str) -> None:
        self._init(path=path)


class CommandTarget(_FrozenValue):
    """The version of ``path`` that command ``command_id`` wrote."""

    __slots__ = ("path", "command_id")
    path: str
    command_id: int

    def __init__(self, path: str, command_id: int) -> None:
        self._init(path=path, command_id=command_id)


Target = DiskTarget | CommandTarget


def choose_writer(
    candidates: Sequence[WrittenVersion],
    mtime_ns: int,
    reader_start: datetime | None,
    reader_id: int | None,
) -> tuple[WrittenVersion | None, int]:
    """The writer of a file version among ``candidates`` (every write of
    its content), and how many other commands wrote that content: of the
    writes that can have made this version
    (:func:`shournal.data.possible_writers`: the same mtime, else a
    run that covers the mtime), the latest to finish before the reader
    started.  None: written outside the journal."""
    eligible = [
        c
        for c in candidates
        if c.command_id != reader_id and (reader_start is None or c.end_time <= reader_start)
    ]
    pool = possible_writers(eligible, mtime_ns)
    if not pool:
        return None, len({c.command_id for c in candidates} - {reader_id})
    chosen = max(pool, key=lambda c: (c.end_time, c.command_id, c.write_id))
    others = {c.command_id for c in candidates} - {chosen.command_id, reader_id}
    return chosen, len(others)


class _Walk:
    def __init__(self, reader: JournalReader, max_depth: int | None) -> None:
        self.reader = reader
        self.lin = Lineage(max_depth=max_depth)
        self.max_depth = max_depth
        self.by_key: dict[VersionKey, FileNode] = {}
        self.edge_set: set[tuple[str, int, str]] = set()
        # (node, hashes to look up, reader start, reader id, depth of its writer)
        self.queue: deque[tuple[FileNode, frozenset[int], datetime | None, int | None, int]] = (
            deque()
        )

    def node(self, key: VersionKey) -> tuple[FileNode, bool]:
        found = self.by_key.get(key)
        if found is not None:
            return found, False
        node = FileNode(
            id=f"f{len(self.lin.files) + 1}",
            path=key[0],
            size=key[1],
            mtime_ns=key[2],
            hash=key[3],
        )
        self.by_key[key] = node
        self.lin.files[node.id] = node
        return node, True

    def edge(self, edge: Edge) -> None:
        ident = (edge.kind, edge.command_id, edge.file)
        if ident not in self.edge_set:
            self.edge_set.add(ident)
            self.lin.add_edge(edge)

    def add_target(self, target: Target) -> None:
        path = os.fsencode(os.path.abspath(target.path))
        if isinstance(target, CommandTarget):
            cmd = self.reader.command(target.command_id)
            if cmd is None:
                raise LineageError(f"no command with id {target.command_id}")
            wrote = [ev for ev in cmd.writes if ev.path == path]
            if not wrote:
                raise LineageError(
                    f"command {target.command_id} did not write {os.fsdecode(path)}"
                )
            ev = wrote[-1]
            node, _ = self.node((ev.path, ev.size, ev.mtime_ns, ev.hash))
            node.target = True
            node.hash_chunk_size, node.hash_max_reads = cmd.hash_chunk_size, cmd.hash_max_reads
            self.lin.targets.append(node.id)
            hashes = [] if ev.hash is None else [ev.hash]
            others = self.reader.writers_of(ev.size, ev.mtime_ns, hashes)
            count = len({c.command_id for c in others} - {cmd.id})
            self.edge(Edge("wrote", cmd.id, node.id, other_candidates=count))
            self.visit(cmd.id, 1)
            return
        probe = self.reader.probe(path)
        only = next(iter(probe.hashes)) if len(probe.hashes) == 1 else None
        node, new = self.node((path, probe.size, probe.mtime_ns, only))
        node.target = True
        if node.id not in self.lin.targets:
            self.lin.targets.append(node.id)
        if new:
            self.queue.append((node, probe.hashes, None, None, 1))

    def visit(self, command_id: int, depth: int) -> None:
        if command_id in self.lin.commands:
            return
        cmd = self.reader.command(command_id)  # loaded with its level
        if cmd is None:  # deleted while we walked
            return
        self.lin.commands[command_id] = cmd
        self.lin.depth[command_id] = depth
        own = {(w.path, w.size, w.mtime_ns, w.hash) for w in cmd.writes}
        for ev in cmd.reads:
            key = (ev.path, ev.size, ev.mtime_ns, ev.hash)
            if key in own:
                continue
            node, new = self.node(key)
            if node.event is None:
                node.event = ev
                node.hash_chunk_size = cmd.hash_chunk_size
                node.hash_max_reads = cmd.hash_max_reads
            self.edge(Edge("read", command_id, node.id))
            if new:
                hashes = frozenset() if ev.hash is None else frozenset([ev.hash])
                self.queue.append((node, hashes, cmd.start_time, command_id, depth + 1))

    def run(self) -> Lineage:
        # One level at a time: the writers of every file version of the
        # level (one statement: an index lookup each), then all their
        # commands in one batch, then their reads make the next level.
        # Commands are visited in the order their versions were queued, so
        # file node ids are those of a walk one version at a time.
        while self.queue:
            level = []
            for item in self.queue:
                if self.max_depth is not None and item[4] > self.max_depth:
                    item[0].truncated = True
                else:
                    level.append(item)
            self.queue.clear()
            found = self.reader.writers_of_many(
                [(node.size, node.mtime_ns, hashes) for node, hashes, *_ in level]
            )
            chosen_writers: list[tuple[int, int]] = []  # (command id, depth)
            for (node, _, start, reader_id, depth), candidates in zip(level, found, strict=True):
                chosen, others = choose_writer(candidates, node.mtime_ns, start, reader_id)
                if chosen is None:
                    node.leaf = True
                    node.content_writers = others
                    continue
                if node.target and node.hash is None and chosen.hash is not None:
                    # A target hashed under several settings: keep the one that matched.
                    del self.by_key[node.key]
                    node.hash = chosen.hash
                    self.by_key.setdefault(node.key, node)
                self.edge(
                    Edge(
                        "wrote",
                        chosen.command_id,
                        node.id,
                        written_path=None if chosen.path == node.path else chosen.path,
                        other_candidates=others,
                    )
                )
                chosen_writers.append((chosen.command_id, depth))
            self.reader.commands(
                cid for cid, _ in chosen_writers if cid not in self.lin.commands
            )
            for cid, depth in chosen_writers:
                self.visit(cid, depth)
        return self.lin


def build_lineage(
    reader: JournalReader, targets: Iterable[Target], max_depth: int | None = None
) -> Lineage:
    """The lineage of every target in one graph (shared history once).

    :raises LineageError: ``max_depth`` < 1, or a command target does not
        exist or did not write its file.
    :raises shournal.data.QueryFileError: a target cannot be read.
    """
    if max_depth is not None and max_depth < 1:
        raise LineageError("--depth must be at least 1")
    walk = _Walk(reader, max_depth)
    with reader.snapshot():
        for target in targets:
            walk.add_target(target)
        return walk.run()
