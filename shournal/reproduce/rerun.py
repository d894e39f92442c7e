"""Recording a `shournal rerun` (Rex's runnew) and linking it to its origin.

``--in-place`` runs the new command in the real tree through
:func:`shournal.capture.runner.run_observed` with its apparatus: recorded as any
command, plus ``derived_from``.

A sandboxed rerun cannot be observed that way: bubblewrap clones the
mounts into a namespace of its own, and the helper's fanotify marks are
on the recorded namespace's mounts, so no event of the sandbox reaches
the holder (and the setuid helper cannot run inside the sandbox, which
sets no_new_privs).  It is recorded from what the sandbox is known to
have been instead, and says so (``"observed": false`` in its manifest):

* the manifest's reads are the origin's read files as the sandbox showed
  them (archived content, or the host file for ``--input`` and host
  programs, digested now);
* its writes are the files the command left in OUTDIR (every file of the
  writable mirrors), each with its full digest, under the path the command
  wrote (the recorded one); the journal's write events name the file in
  OUTDIR, where its content is, so that `query --wfile` finds it there;
* the journal's read events are the host files the sandbox showed instead
  of archived content (``--input`` files), the ones a lineage of the new
  result must go through.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

from shournal.confined import Confined
from shournal.hashing import content_digest, partial_xxh64_bytes
from shournal.record import CommandRecord, FileEvent
from shournal.redact import redact_env
from shournal.reproduce.experiment import Experiment
from shournal.reproduce.replay import META, Changes, made_files
from shournal.store.archive import MANIFEST_FORMAT, encode_manifest


def _host_entry(path: str, hashing: tuple[int, int] | None) -> tuple[list[Any], FileEvent] | None:
    """(manifest entry tail, journal event) of a host file, or None."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None  # never block on a FIFO named as a program
        data = Path(path).read_bytes()
    except OSError:
        return None
    hsh = partial_xxh64_bytes(data, *hashing) if hashing else None
    entry = [st.st_size, st.st_mtime_ns, st.st_mode, hsh, content_digest(data).hex(), None]
    return entry, FileEvent(os.fsencode(path), st.st_size, st.st_mtime_ns, st.st_mode, hsh)


def sandbox_record(exp: Experiment, report: dict[str, Any], changes: Changes,
                   notes: dict[str, Any], text: str, cfg: Any) -> CommandRecord:
    """The record of a sandboxed rerun of ``exp`` (see the module)."""
    import pwd

    hashing = (cfg.hash.chunk_size, cfg.hash.max_count_of_reads) if cfg.hash.enable else None
    outdir = Path(report["outdir"])
    man = exp.manifest or {}
    reads: dict[str, list[Any]] = {r[0]: list(r[1:]) for r in man.get("reads", [])}
    host_reads: list[FileEvent] = []
    for path in [*changes.inputs, *notes["local"]]:
        shown = changes.inputs.get(path, path)
        got = _host_entry(shown, hashing)
        if got is None:
            reads.pop(path, None)
            continue
        reads[path] = got[0]
        if path in changes.inputs:
            host_reads.append(got[1])
    writes: list[list[Any]] = []
    events: list[FileEvent] = []
    with Confined(outdir) as out:
        for rel in made_files(out, notes):
            if rel == META or rel.startswith(META + "/"):
                continue
            data = out.read(rel)
            st = out.lstat(rel)
            if data is None or st is None:
                continue
            hsh = partial_xxh64_bytes(data, *hashing) if hashing else None
            full = os.fsencode(str(out.shown(rel)))
            writes.append(["/" + rel, st.st_size, st.st_mtime_ns, st.st_mode, hsh,
                           content_digest(data).hex(), None])
            events.append(FileEvent(full, st.st_size, st.st_mtime_ns, st.st_mode, hsh))
    env = dict(man.get("env", {}))
    env.update(changes.env)
    env, redacted = redact_env(env, cfg.apparatus.secret_env_names)
    manifest = {
        "format": MANIFEST_FORMAT,
        "digest_algorithm": man.get("digest_algorithm"),
        "observed": False,
        "sandbox": {"outdir": str(outdir), "archived_programs": len(notes["archived_programs"]),
                    "local_programs": sorted(notes["local"])},
        "argv": None if changes.command is not None else man.get("argv"),
        "env": env,
        "redacted": redacted,
        "umask": man.get("umask"),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(set(os.getgroups()) | {os.getgid()}),
        "hostname": man.get("hostname"),
        "kernel": os.uname().release,
        "machine": os.uname().machine,
        "archive_outputs": False,
        "derived_from": exp.command.id,
        "reads": [[p, *e] for p, e in sorted(reads.items())],
        "writes": sorted(writes),
        "not_archived": {},
        "archived_bytes_added": 0,
        "content_bytes": 0,
    }
    try:
        username = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        username = str(os.getuid())
    start, end = report["time_ns"]
    return CommandRecord(
        text=text,
        return_value=report["exit_status"]["replayed"],
        start_ns=start,
        end_ns=end,
        working_dir=exp.command.working_dir,
        username=username,
        hostname=socket.gethostname(),
        session_uuid=None,
        hash_chunk_size=hashing[0] if hashing else None,
        hash_max_reads=hashing[1] if hashing else None,
        writes=events,
        reads=host_reads,
        apparatus=encode_manifest(manifest),
        derived_from=exp.command.id,
    )
