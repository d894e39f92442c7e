"""After `pip install` into the installation's venv (`make install`):
record the installed locations in shournal/_installed.py (see _paths.py),
and replace pip's `shournal` launcher by one that imports nothing but
shournal (pip's imports re, ~5 ms of every `shournal query`)."""

from __future__ import annotations

import sys
from pathlib import Path

LAUNCHER = """\
# Written by shournal's scripts/write_installed.py in place of pip's
# launcher, which imports re: ~5 ms of every `shournal query`.
import sys

from shournal.cli import main

sys.exit(main())
"""


def write_launcher(script: Path) -> None:
    """Replace the console script ``script`` (pip's) by LAUNCHER, keeping
    its first line (#! and the venv's interpreter)."""
    shebang = script.read_text().splitlines()[0]
    if not shebang.startswith("#!"):
        raise SystemExit(f"{script}: not a script with a #! line")
    tmp = script.with_name(script.name + ".tmp")
    tmp.write_text(f"{shebang}\n{LAUNCHER}")
    tmp.chmod(script.stat().st_mode & 0o7777)
    tmp.replace(script)


def main(prefix: str) -> None:
    import shournal

    target = Path(shournal.__file__).parent / "_installed.py"
    target.write_text(
        f'SUID_PATH = "{prefix}/libexec/shournal/shournal-suid"\n'
        f'LISTENER_PATH = "{prefix}/libexec/shournal/shournal-listener"\n'
        f'PRELOAD_PATH = "{prefix}/lib/shournal/libshournal_preload.so"\n'
        f'SHELL_DIR = "{prefix}/share/shournal"\n'
    )
    # the venv's bin/, where pip put the console scripts
    write_launcher(Path(sys.executable).parent / "shournal")


if __name__ == "__main__":
    main(sys.argv[1])
