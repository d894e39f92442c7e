"""The journal key (which store daemon and spool serve a command line) is
computed alike by the C side (native/shournal_forward.h: the shell's
preload library, the helper's hand-over, the forwarder) and by Python
(shournal._paths.journal_key: the daemon, the listener, query, doctor)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from shournal import _paths

NATIVE = Path(__file__).resolve().parents[2] / "native"
PROGRAM = Path(__file__).resolve().parents[1] / "native" / "journal_key.c"

ENVIRONMENTS = [
    {},
    {"HOME": "/home/u"},
    {"HOME": "/home/u", "SHOURNAL_DB_URL": ""},
    {"HOME": "/home/u", "SHOURNAL_DB_URL": "sqlite:////home/u/proj.sqlite"},
    {"HOME": "/home/u", "XDG_DATA_HOME": "/d"},
    {"HOME": "/home/u", "XDG_CONFIG_HOME": "/d"},
    {"HOME": "/scratch/\u00e9t\u00e9", "XDG_RUNTIME_DIR": "/run/user/1", "OTHER": "x"},
    {"SHOURNAL_DB_URL": "postgresql://u:pw@h/db", "XDG_CONFIG_HOME": "relative",
     "XDG_DATA_HOME": "/x//y/", "HOME": "/"},
]


@pytest.fixture(scope="module")
def key_program(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("key") / "journal_key"
    subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-I", str(NATIVE), "-o", str(exe),
                    str(PROGRAM)], check=True)  # fmt: skip
    return exe


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_c_and_python_compute_the_same_key(env, key_program):
    out = subprocess.run([str(key_program)], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    assert out == _paths.journal_key(env)
    assert len(out) == 16


def test_the_variables_that_decide_the_journal_and_only_they_change_the_key():
    base = {"HOME": "/home/u", "PATH": "/bin"}
    key = _paths.journal_key(base)
    assert _paths.journal_key({**base, "PATH": "/usr/bin", "XDG_RUNTIME_DIR": "/r"}) == key
    keys = {_paths.journal_key({**base, name: "/other"}) for name in _paths.JOURNAL_KEY_VARIABLES}
    assert len(keys) == len(_paths.JOURNAL_KEY_VARIABLES) and key not in keys
    # a value is not confused with the next one's
    assert _paths.journal_key({"XDG_CONFIG_HOME": "/a", "XDG_DATA_HOME": ""}) != \
        _paths.journal_key({"XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "/a"})


def test_our_own_key_is_of_our_environment(monkeypatch):
    monkeypatch.setenv("SHOURNAL_DB_URL", "sqlite:////tmp/x.sqlite")
    assert _paths.journal_key() == _paths.journal_key(dict(os.environ))
