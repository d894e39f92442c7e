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
