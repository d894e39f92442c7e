"""Record the installed locations in shournal/_installed.py (see _paths.py)."""

import sys
from pathlib import Path

import shournal

prefix = sys.argv[1]
target = Path(shournal.__file__).parent / "_installed.py"
target.write_text(
    f'SUID_PATH = "{prefix}/libexec/shournal/shournal-suid"\n'
    f'LISTENER_PATH = "{prefix}/libexec/shournal/shournal-listener"\n'
    f'PRELOAD_PATH = "{prefix}/lib/shournal/libshournal_preload.so"\n'
    f'SHELL_DIR = "{prefix}/share/shournal"\n'
)
