"""Capture: everything that runs while a command line is recorded.

The listener (or the per-user store daemon) receives the helper's records
over the relay :mod:`.protocol`, applies the :mod:`.filters`, hashes file
content (:mod:`.hashing`), spools what the store cannot take yet
(:mod:`.spool`) and hands :mod:`.record` objects to the store.  These
modules run on every command line, so they import only the standard
library, each other and the store.
"""
