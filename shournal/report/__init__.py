"""Output formats for query results: :mod:`.human`, :mod:`.json`,
:mod:`.shournal_json` and :mod:`.html`."""
