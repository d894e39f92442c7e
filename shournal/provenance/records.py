"""A lineage as a standard run record: a Process Run Crate (RO-Crate) or
W3C PROV-JSON.  Unlike the workflow exports these describe what ran, not
how to rerun it: every command of the lineage is kept.

* ``rocrate``: ``DIR/ro-crate-metadata.json``, RO-Crate 1.1 conforming to
  the Process Run Crate profile 0.5.  One ``CreateAction`` per command
  (``instrument``: the script it ran, else its program, as a
  ``SoftwareApplication``; ``object``: the file versions it read;
  ``result``: the ones it wrote; ``startTime``, ``endTime``, ``agent``:
  the user, ``actionStatus``, ``description``: the user's note
  (``shournal note``), else the command line;
  ``environment``: for a command recorded with its apparatus, its
  environment variables as ``PropertyValue`` entities, redacted again
  with the current secret patterns; a ``Collection`` among the results
  for each directory it wrote several files in; ``containerImage``: the
  SIF a run of ``shournal recombine`` ran in).  The
  archived scripts are copied into ``DIR/scripts/`` and are part of the
  crate; the other file versions stay where they were and are named by
  their ``file://`` URL (a path read in several versions gets one entity
  per version: ``#v2`` and on).  Files carry ``contentSize``,
  ``dateModified`` and shournal's partial hash.
* ``prov``: ``DIR/prov.json`` in PROV-JSON: commands as activities, file
  versions as entities, users as agents; ``used``, ``wasGeneratedBy``,
  ``wasAssociatedWith`` (with the script as the plan); a command's note
  as its ``dcterms:description``, its tags as ``shournal:tags``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from shournal.data import CommandView
from shournal.provenance.export import ExportError, ScriptCopy, _script_copy, _write_new, program_of
from shournal.provenance.graph import FileNode, Lineage
from shournal.provenance.render import _iso_ns
from shournal.report.json import _iso

if TYPE_CHECKING:
    from shournal.provenance.readers import JournalReader

RecordFormat = Literal["rocrate", "prov"]

FILE_NAMES: dict[str, str] = {"rocrate": "ro-crate-metadata.json", "prov": "prov.json"}

RO_CRATE_CONTEXT = "https://w3id.org/ro/crate/1.1/context"
WORKFLOW_RUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
RO_CRATE_SPEC = "https://w3id.org/ro/crate/1.1"
PROCESS_RUN_PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
# The root dataset must have a licence; the journal cannot know the
# author's choice (``--license`` gives it).
NO_LICENSE = "No licence was given when this crate was exported: ask its author before reusing it."
SIF_IMAGE = "https://w3id.org/ro/terms/workflow-run#SIFImage"
# Terms of shournal's own in PROV-JSON (a URN: it names, it is not fetched).
SHOURNAL_NS = "urn:shournal:"
# Dublin Core terms: a command's note as its dcterms:description in PROV.
DCTERMS_NS = "http://purl.org/dc/terms/"


@dataclass(slots=True)
class RecordResult:
    path: str
    commands: int
    files: int
    scripts: list[ScriptCopy]


def _file_url(path: bytes) -> str:
    return "file://" + quote(os.fsdecode(path), safe="/", errors="surrogateescape")


def instrument_of(lin: Lineage, cmd: CommandView) -> tuple[str, FileNode | None]:
    """What a command ran: its program's name, and the archived script it
    named (as the program or one of its arguments), if any."""
    program, args = program_of(cmd.text)
    named = {os.path.basename(w) for w in [program, *args] if w}
    for node in lin.reads(cmd.id):
        if node.archived_id is not None and os.path.basename(os.fsdecode(node.path)) in named:
            return program, node
    return program, None


class _Planner:
    """Ids and copies shared by both formats."""

    def __init__(self, lin: Lineage, reader: JournalReader, copy_scripts: bool,
                 secret_env_names: Sequence[str] = ()) -> None:
        self.lin = lin
        self.reader = reader
        self.secret_env_names = tuple(secret_env_names)
        self.commands = lin.commands_by_start()
        if not self.commands:
            raise ExportError("no recorded command wrote the targets: nothing to export")
        self.copies: dict[str, ScriptCopy] = {}  # node id -> copy
        taken: set[str] = set()
        if copy_scripts:
            for node in lin.files.values():
                if node.archived_id is not None:
                    self.copies[node.id] = _script_copy(node, reader, taken)
        self.file_ids: dict[str, str] = {}
        versions: dict[bytes, int] = {}
        for node in sorted(lin.files.values(), key=lambda n: (n.mtime_ns, int(n.id[1:]))):
            copy = self.copies.get(node.id)
            if copy is not None:
                self.file_ids[node.id] = f"scripts/{quote(copy.name)}"
                continue
            seen = versions.get(node.path, 0) + 1
            versions[node.path] = seen
            url = _file_url(node.path)
            self.file_ids[node.id] = url if seen == 1 else f"{url}#v{seen}"

    def agent_id(self, cmd: CommandView) -> str:
        return f"#user-{quote(cmd.username)}@{quote(cmd.hostname)}"

    def environment(self, cmd: CommandView) -> dict[str, str] | None:
        """The recorded environment of ``cmd``, secret-looking values
        redacted under the current patterns too (a name added to
        ``secret_env_names`` since the recording)."""
        from shournal.redact import redact_env

        env = self.reader.environment(cmd.id)
        return None if env is None else redact_env(env, self.secret_env_names)[0]

    def write(self, out_dir: str, name: str, doc: dict[str, Any], force: bool) -> str:
        path = os.path.join(out_dir, name)
        try:
            os.makedirs(out_dir, exist_ok=True)
            if os.path.lexists(path) and not force:
                raise ExportError(f"{path} exists (use --force to replace it)")
            if self.copies:
                scripts_dir = os.path.join(out_dir, "scripts")
                os.makedirs(scripts_dir, exist_ok=True)
                for copy in self.copies.values():
                    _write_new(os.path.join(scripts_dir, copy.name), copy.data,
                               0o755 if copy.executable else 0o644)  # fmt: skip
            text = json.dumps(doc, indent=1, ensure_ascii=True) + "\n"
            _write_new(path, text.encode(), 0o644)
        except OSError as e:
            raise ExportError(f"cannot write {e.filename or out_dir}: {e.strerror}") from None
        return path


def _targets_text(lin: Lineage) -> str:
    return ", ".join(os.fsdecode(lin.files[t].path) for t in lin.targets)


def container_image_of(cmd: CommandView) -> str | None:
    """The SIF image a run of ``shournal recombine`` ran in: its command
    line names it (``python3 -m shournal.rereso.sandbox bwrap|apptainer
    ROOTFS|SIF`` or ``RUNTIME|SIF``)."""
    _program, args = program_of(cmd.text)
    for i in range(len(args) - 3):
        if args[i:i + 2] == ["-m", "shournal.rereso.sandbox"] and args[i + 2] in (
                "bwrap", "apptainer"):
            sif = args[i + 3].partition("|")[2]
            return sif if sif.startswith("/") else None
    return None


def _collections(cmd: CommandView, written: list[FileNode], plan: _Planner,
                 out: list[dict[str, Any]]) -> list[dict[str, str]]:
    """A ``Collection`` (added to ``out``) for each directory in which
    ``cmd`` wrote several files, with those files as its parts (the first
    by path as its ``mainEntity``): the directory as one result, its
    files still each their own entity."""
    by_dir: dict[bytes, list[FileNode]] = {}
    for node in written:
        by_dir.setdefault(os.path.dirname(node.path), []).append(node)
    refs = []
    for d, nodes in sorted(by_dir.items()):
        if len(nodes) < 2:
            continue
        cid = f"#command-{cmd.id}-dir-{quote(os.fsdecode(d), safe='/', errors='surrogateescape')}"
        out.append({
            "@id": cid, "@type": "Collection", "name": os.fsdecode(d),
            "description": f"The {len(nodes)} files command {cmd.id} wrote in {os.fsdecode(d)}.",
            "hasPart": [{"@id": plan.file_ids[n.id]} for n in nodes],
            # The profile recommends one; a directory has none of its own.
            "mainEntity": {"@id": plan.file_ids[min(nodes, key=lambda n: n.path).id]},
        })  # fmt: skip
        refs.append({"@id": cid})
    return refs


def rocrate_document(
    lin: Lineage, plan: _Planner, now: datetime, license: str | None = None
) -> dict[str, Any]:
    """The ro-crate-metadata.json of a lineage (see the module docstring).
    ``license``: a URL (a contextual entity) or a text; default
    :data:`NO_LICENSE`."""
    graph: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    licence: Any = license or NO_LICENSE
    if licence.startswith(("http://", "https://")):
        extra.append({"@id": licence, "@type": "CreativeWork", "name": licence})
        licence = {"@id": licence}
    files: dict[str, dict[str, Any]] = {}
    for node in lin.files.values():
        fid = plan.file_ids[node.id]
        entity: dict[str, Any] = {
            "@id": fid,
            "@type": "File",
            "name": os.path.basename(os.fsdecode(node.path)),
            "alternateName": os.fsdecode(node.path),
            "contentSize": str(node.size),
            "dateModified": _iso_ns(node.mtime_ns),
        }
        if node.hash is not None:
            entity["identifier"] = f"shournal-partial-xxh64:{node.hash}"
        if node.leaf:
            entity["description"] = "Not written by a recorded command (an input of the lineage)."
        files[node.id] = entity
    tools: dict[str, dict[str, Any]] = {}
    actions = []
    environment: list[dict[str, Any]] = []
    collections: list[dict[str, Any]] = []
    images: dict[str, dict[str, Any]] = {}
    for cmd in plan.commands:
        program, script = instrument_of(lin, cmd)
        if script is not None:
            tool_id = plan.file_ids[script.id]
            entity = files[script.id]
            entity["@type"] = ["File", "SoftwareApplication"]
        else:
            tool_id = f"#program-{quote(program or 'shell')}"
            tools.setdefault(tool_id, {
                "@id": tool_id, "@type": "SoftwareApplication", "name": program or "shell",
            })  # fmt: skip
        action: dict[str, Any] = {
            "@id": f"#command-{cmd.id}",
            "@type": "CreateAction",
            "name": f"command {cmd.id}: {cmd.text.splitlines()[0] if cmd.text else ''}",
            # the user's note says what the command was for; else its line
            "description": cmd.text if cmd.note is None else cmd.note,
            "instrument": {"@id": tool_id},
            "agent": {"@id": plan.agent_id(cmd)},
            "startTime": _iso(cmd.start_time),
            "endTime": _iso(cmd.end_time),
        }
        written = [n for n, _ in lin.written(cmd.id)]
        for key, nodes in (("object", lin.reads(cmd.id)), ("result", written)):
            refs = [{"@id": plan.file_ids[n.id]} for n in nodes]
            if key == "result":
                refs += _collections(cmd, written, plan, collections)
            if refs:
                # One value is not an array (RO-Crate's JSON-LD form).
                action[key] = refs[0] if len(refs) == 1 else refs
        sif = container_image_of(cmd)
        if sif is not None:
            iid = f"#container-{quote(sif, safe='/', errors='surrogateescape')}"
            images.setdefault(iid, {
                "@id": iid, "@type": "ContainerImage",
                "additionalType": {"@id": SIF_IMAGE},
                "name": os.path.basename(sif), "alternateName": sif,
            })  # fmt: skip
            action["containerImage"] = {"@id": iid}
        env = plan.environment(cmd)
        if env:
            ids = []
            for name, value in sorted(env.items()):
                pid = f"#command-{cmd.id}-env-{quote(name, safe='')}"
                environment.append({"@id": pid, "@type": "PropertyValue", "name": name,
                                    "value": value})
                ids.append({"@id": pid})
            action["environment"] = ids
        if cmd.return_value_known and cmd.return_value != 0:
            action["actionStatus"] = "http://schema.org/FailedActionStatus"
            action["error"] = f"exit status {cmd.return_value}"
        else:
            action["actionStatus"] = "http://schema.org/CompletedActionStatus"
        actions.append(action)
    agents = {
        plan.agent_id(c): {"@id": plan.agent_id(c), "@type": "Person",
                           "name": f"{c.username} on {c.hostname}"}
        for c in plan.commands
    }  # fmt: skip
    root = {
        "@id": "./",
        "@type": "Dataset",
        "name": f"Provenance of {_targets_text(lin)}",
        "description": (
            f"The {len(plan.commands)} recorded shell command(s) that made "
            f"{_targets_text(lin)}, with the file versions they read and wrote, "
            "as recorded by shournal."
        ),
        "datePublished": _iso(now),
        "license": licence,
        "conformsTo": {"@id": PROCESS_RUN_PROFILE},
        "hasPart": [{"@id": f["@id"]} for f in files.values()],
        "mentions": [{"@id": e["@id"]} for e in (*actions, *collections)],
    }
    graph.append({
        "@id": "ro-crate-metadata.json", "@type": "CreativeWork",
        "conformsTo": {"@id": RO_CRATE_SPEC}, "about": {"@id": "./"},
    })  # fmt: skip
    graph.append(root)
    graph.append({
        "@id": PROCESS_RUN_PROFILE, "@type": "CreativeWork", "name": "Process Run Crate",
        "version": "0.5",
    })  # fmt: skip
    graph += actions
    graph += files.values()
    graph += tools.values()
    graph += agents.values()
    graph += environment
    graph += collections
    graph += images.values()
    graph += extra
    return {"@context": [RO_CRATE_CONTEXT, WORKFLOW_RUN_CONTEXT], "@graph": graph}


def prov_document(lin: Lineage, plan: _Planner) -> dict[str, Any]:
    """The PROV-JSON document of a lineage (see the module docstring)."""
    sh = "shournal:"

    def entity_id(node: FileNode) -> str:
        return f"{sh}file-{node.id}"

    def activity_id(cmd: CommandView) -> str:
        return f"{sh}command-{cmd.id}"

    def agent_id(cmd: CommandView) -> str:
        return f"{sh}user-{quote(cmd.username)}-{quote(cmd.hostname)}"

    entities: dict[str, Any] = {}
    for node in lin.files.values():
        e: dict[str, Any] = {
            "prov:label": os.fsdecode(node.path),
            f"{sh}path": os.fsdecode(node.path),
            f"{sh}size": node.size,
            f"{sh}mtime": {"$": _iso_ns(node.mtime_ns), "type": "xsd:dateTime"},
        }
        if node.hash is not None:
            e[f"{sh}partialHash"] = str(node.hash)
        copy = plan.copies.get(node.id)
        if copy is not None:
            e[f"{sh}archivedCopy"] = f"scripts/{copy.name}"
        entities[entity_id(node)] = e
    activities: dict[str, Any] = {}
    agents: dict[str, Any] = {}
    used: dict[str, Any] = {}
    generated: dict[str, Any] = {}
    associated: dict[str, Any] = {}
    for cmd in plan.commands:
        aid = activity_id(cmd)
        activities[aid] = {
            "prov:startTime": _iso(cmd.start_time),
            "prov:endTime": _iso(cmd.end_time),
            "prov:label": cmd.text,
            f"{sh}workingDirectory": cmd.working_dir,
            f"{sh}hostname": cmd.hostname,
        }
        if cmd.note is not None:
            activities[aid]["dcterms:description"] = cmd.note
        if cmd.tags:
            activities[aid][f"{sh}tags"] = list(cmd.tags)
        if cmd.return_value_known:
            activities[aid][f"{sh}exitStatus"] = cmd.return_value
        agents[agent_id(cmd)] = {"prov:type": {"$": "prov:Person", "type": "prov:QUALIFIED_NAME"},
                                 "prov:label": cmd.username}  # fmt: skip
        for node in lin.reads(cmd.id):
            used[f"_:u{len(used) + 1}"] = {"prov:activity": aid, "prov:entity": entity_id(node)}
        for node, _edge in lin.written(cmd.id):
            generated[f"_:g{len(generated) + 1}"] = {
                "prov:entity": entity_id(node), "prov:activity": aid,
            }  # fmt: skip
        assoc = {"prov:activity": aid, "prov:agent": agent_id(cmd)}
        _program, script = instrument_of(lin, cmd)
        if script is not None:
            assoc["prov:plan"] = entity_id(script)
        associated[f"_:a{len(associated) + 1}"] = assoc
    return {
        "prefix": {"shournal": SHOURNAL_NS, "dcterms": DCTERMS_NS},
        "entity": entities,
        "activity": activities,
        "agent": agents,
        "used": used,
        "wasGeneratedBy": generated,
        "wasAssociatedWith": associated,
    }


def export_record(
    lin: Lineage,
    reader: JournalReader,
    fmt: RecordFormat,
    out_dir: str,
    *,
    force: bool = False,
    now: datetime | None = None,
    license: str | None = None,
    secret_env_names: Sequence[str] | None = None,
) -> RecordResult:
    """Write ``out_dir/ro-crate-metadata.json`` (with ``out_dir/scripts/``)
    or ``out_dir/prov.json`` for the lineage.

    :raises ExportError: nothing to export, the file exists (without
        ``force``), or ``out_dir`` cannot be written.
    """
    if secret_env_names is None:
        from shournal.config import ApparatusConfig

        secret_env_names = ApparatusConfig().secret_env_names
    plan = _Planner(lin, reader, copy_scripts=fmt == "rocrate",
                    secret_env_names=secret_env_names)
    if fmt == "rocrate":
        doc = rocrate_document(lin, plan, now or datetime.now(UTC), license)
    else:
        doc = prov_document(lin, plan)
    path = plan.write(out_dir, FILE_NAMES[fmt], doc, force)
    return RecordResult(path, len(plan.commands), len(lin.files), list(plan.copies.values()))


__all__ = ["FILE_NAMES", "RecordResult", "export_record", "instrument_of"]
