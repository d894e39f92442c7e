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
"""
