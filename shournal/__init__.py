"""shournal: a shell journal.

Data flows one way: capture (native helper + :mod:`shournal.listener`) ->
:mod:`shournal.store` -> :mod:`shournal.query` -> :mod:`shournal.render`.
The CLI in :mod:`shournal.cli` is a thin layer over these modules.
"""

__version__ = "0.1.0"
