"""Every module of the package imports: a name moved between modules (and an
import left pointing at the old one) fails here, not in the one command
that loads the module."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import shournal

MODULES = sorted(m.name for m in pkgutil.walk_packages(shournal.__path__, "shournal.")
                 if not m.name.endswith("__main__"))  # fmt: skip


def test_the_package_has_its_modules() -> None:
    # positive control: the walk sees the tree (a broken walk would pass every case)
    assert "shournal.cli.reproduce" in MODULES and len(MODULES) > 100


@pytest.mark.parametrize("name", MODULES)
def test_imports(name: str) -> None:
    importlib.import_module(name)
