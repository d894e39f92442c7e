"""The preload library exports the libc functions it wraps and nothing
else: its own functions stay hidden (a symbol it exported by mistake
would interpose on the shell's or another library's).
`make -C native check-exports` compares the built library's dynamic
symbols with native/libshournal_preload.exports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NATIVE = Path(__file__).resolve().parents[2] / "native"


def check_exports(native: Path, build: Path) -> subprocess.CompletedProcess[str]:
    build.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["make", "-s", "-C", str(native), f"BUILD={build}", "check-exports"],
                          capture_output=True, text=True)


def test_the_library_exports_exactly_the_listed_wrappers(tmp_path: Path) -> None:
    done = check_exports(NATIVE, tmp_path / "build")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_symbol_missing_from_the_list_fails_the_check(tmp_path: Path) -> None:
    """Positive control: the check sees a difference (here a wrapper the
    list does not name)."""
    native = tmp_path / "native"
    shutil.copytree(NATIVE, native)
    (tmp_path / "shournal").mkdir()  # the Makefile reads the version there
    shutil.copy2(NATIVE.parent / "shournal" / "__init__.py", tmp_path / "shournal")
    listed = native / "libshournal_preload.exports"
    listed.write_text("".join(line + "\n" for line in listed.read_text().split()
                              if line != "getrandom"))
    done = check_exports(native, tmp_path / "build")
    assert done.returncode != 0
    assert "+getrandom" in done.stdout, done.stdout + done.stderr
