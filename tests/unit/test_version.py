"""One version string, shournal/__init__.py's ``__version__``: the Python
distribution and the native helper take it from there at build time; the
Debian changelog and man page, which must stay real documents, agree."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import tomllib
from pathlib import Path

from shournal import __version__

REPO = Path(__file__).resolve().parents[2]
DEBIAN = REPO / "packaging" / "debian"


def test_pyproject_takes_the_version_from_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "shournal.__version__"}
    assert importlib.metadata.version("shournal") == __version__


def test_the_helper_is_built_with_the_version(tmp_path):
    subprocess.run(["make", "-s", "-C", str(REPO / "native"), f"BUILD={tmp_path}",
                    f"{tmp_path}/shournal-suid"], check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([str(tmp_path / "shournal-suid"), "--version"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out == f"shournal-suid {__version__}\n"


def test_the_debian_changelog_and_man_page_agree():
    top = (DEBIAN / "changelog").read_text().splitlines()[0]
    m = re.match(r"shournal \(([^)-]+)(-[^)]*)?\) ", top)
    assert m and m.group(1) == __version__, top
    # (the man pages' version: tests/unit/test_shell_docs.py)
