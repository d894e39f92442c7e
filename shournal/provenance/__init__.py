"""Provenance: from a file back to everything that made it.

* :mod:`~shournal.provenance.graph`: the lineage walk (``shournal lineage``);
* :mod:`~shournal.provenance.status`: is a file still what its lineage
  would make (``shournal status``);
* :mod:`~shournal.provenance.export`: the lineage as a runnable workflow
  (``shournal export snakemake|make``);
* :mod:`~shournal.provenance.render`: human, json and dot output;
* :mod:`~shournal.provenance.readers`: the only module that reads the
  journal.

Nothing here writes to the journal.

Everything downstream of the walk takes a :class:`~shournal.provenance.graph.Lineage`
(commands as ``query`` loads them, file versions, ``read``/``wrote`` edges)
and, when it needs archived content, the reader: further exporters (a
Process Run Crate, PROV-JSON: commands as actions/activities, versions as
entities, the edges as used/generated) and views (the HTML report's
lineage view) are functions of those two; ``query --lineage-of FILE`` is
the command ids of ``build_lineage(...)``.  Switching the journal access to
another API means replacing :mod:`~shournal.provenance.readers` only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.data import Criteria
    from shournal.journal import Journal


def resolve_lineage(journal: Journal, criteria: Criteria) -> Criteria:
    """``criteria`` with its ``lineage_of`` files replaced by the ids of the
    commands in their lineages, as ``shournal lineage`` walks them
    (intersected with ``command_ids``): what :class:`~shournal.journal.Journal`
    takes.  Criteria without ``lineage_of`` come back as they are.

    :raises shournal.data.QueryFileError: a file cannot be read."""
    if criteria.lineage_of is None:
        return criteria
    from dataclasses import replace

    from shournal.provenance.graph import DiskTarget, build_lineage
    from shournal.provenance.readers import JournalReader

    lin = build_lineage(JournalReader(journal), [DiskTarget(p) for p in criteria.lineage_of])
    ids = set(lin.commands)
    if criteria.command_ids is not None:
        ids &= set(criteria.command_ids)
    return replace(criteria, lineage_of=None, command_ids=tuple(sorted(ids)))
