"""shournal: a shell journal.

Data flows one way: capture (native helper + :mod:`shournal.capture`) ->
:mod:`shournal.store` -> :mod:`shournal.query` -> :mod:`shournal.report`.
:class:`shournal.Journal` is the library's front door; the CLI in
:mod:`shournal.cli` is a thin layer over it.

``import shournal`` stays cheap (``shournal version`` and the listener
need it): :class:`Journal` is imported on first use.
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING: the listener imports this package on every
# command line, and typing alone costs it ~2 ms.
TYPE_CHECKING = False
# The one version string: pyproject.toml, native/Makefile and the tests
# read it from here (tests/unit/test_version.py checks the Debian changelog).
__version__ = "0.1.0"
__all__ = ["Journal", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from shournal.journal import Journal


def __getattr__(name: str) -> Any:
    if name == "Journal":
        from shournal.journal import Journal

        return Journal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
