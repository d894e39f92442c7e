"""Query: which commands match (:mod:`.criteria`, :mod:`.find`) and what
their files look like on disk now (:mod:`.filestat`)."""
