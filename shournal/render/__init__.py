"""Output formats for query results: :mod:`.human` and :mod:`.json`."""
