"""The launcher `make install` puts in place of pip's console script
(scripts/write_installed.py): it runs the CLI, keeps the venv's #! line,
and imports nothing before shournal (pip's imports re: ~5 ms of every
`shournal query`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _write_launcher(script: Path) -> None:
    spec = importlib.util.spec_from_file_location("write_installed", REPO / "scripts" /
                                                  "write_installed.py")  # fmt: skip
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_launcher(script)


PIP_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from shournal.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def test_the_launcher_replaces_pips_and_runs_the_cli(tmp_path: Path) -> None:
    script = tmp_path / "shournal"
    script.write_text(PIP_SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    _write_launcher(script)
    text = script.read_text()
    assert text.splitlines()[0] == f"#!{sys.executable}"
    assert "import re" not in text
    assert script.stat().st_mode & 0o777 == 0o755
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("shournal ")
    out = subprocess.run([str(script), "no-such-command"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert out.returncode == 2
