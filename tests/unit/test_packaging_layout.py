"""Every Python package of the source tree is in the installed package:
pyproject.toml finds them (a list kept by hand left a new package out of
the .deb, and its daemon failed to import it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parents[2]


def test_every_directory_with_python_code_is_a_found_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = config["packages"]["find"]["include"]
    found = set(find_packages(where=str(REPO), include=include))
    code = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "shournal").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert code <= found, sorted(code - found)
