"""ReReSo (recombinable tools and benchmarks, Dierl & Howar) from recorded
work: ``shournal describe tool|benchmark`` and ``shournal recombine``.

One package for the whole standard rather than ``shournal.describe``: the
descriptors, the schemas they must satisfy, the media types and the
recombination that reads the descriptors back all share the same facts
(file names, version, the input constraint).

* :mod:`shournal.rereso.schema` -- the shipped 0.3 schemas and validation.
* :mod:`shournal.rereso.mediatype` -- media types from content (libmagic).
* :mod:`shournal.rereso.content` -- the content of a recorded file version
  (the interface the apparatus archive plugs into).
* :mod:`shournal.rereso.describe` -- building tool and benchmark bundles.
* :mod:`shournal.rereso.recombine` -- running tools on matching benchmarks.
"""
