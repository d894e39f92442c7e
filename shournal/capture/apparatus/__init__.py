"""A command's apparatus, recorded while it runs (the recorder's side of
Rex: every file it read, with its content, the digests of what it wrote,
its environment; replayed and compared by :mod:`shournal.reproduce`).

The switches here decide, per command line, whether its apparatus is
recorded; :mod:`shournal.capture.apparatus.recording` does it, imported only
for such a command.
"""

from __future__ import annotations

import os
from pathlib import Path

from shournal.capture import proc, protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shournal.capture.collector import Collector

# Set by `shournal run --apparatus` in the helper's environment, which the
# listener inherits (never in the command's): a JSON object
# {"umask": int, "argv": [str, ...], "archive_outputs": bool}.
ENV_VAR = "SHOURNAL_APPARATUS"
# Exported by SHOURNAL_ENABLE: the shell's pid, for the listener.
SHELL_PID_VAR = "_SHOURNAL_SHELL_PID"
# Set by the preload library in the helper's environment (never the
# command's) when it chose the apparatus's helper options for a shell's
# command line (per shell or per directory).
SHELL_SWITCH_VAR = "SHOURNAL_APPARATUS_SHELL"


def summary_path(listener_pid: int) -> str:
    """Where the listener leaves its one-line summary for `shournal run`
    (the listener is the helper's process: same pid)."""
    from shournal import _paths

    return str(_paths.runtime_dir() / f"apparatus-{listener_pid}")


def collector(cfg: Any, uid: int, gids: frozenset[int], pid: int | None = None,
              cwd: str = "", shell_switch: bool = True) -> Collector:
    """The listener's hook: its Collector, or an ApparatusCollector when
    the command is recorded with its apparatus (`shournal run
    --apparatus`, or a shell's command line, see :func:`shell_apparatus`).
    ``pid``: the process that stands for the command line (default: this
    listener; the store daemon passes its forwarder's); ``cwd``: its
    working directory; ``shell_switch`` False: not a shell's command line
    recorded with its apparatus (nothing of the forwarder is read).  Imports
    nothing more for an ordinary command."""
    if ENV_VAR in os.environ and pid is None:
        from shournal.capture.apparatus.recording import apparatus_collector

        return apparatus_collector(cfg, uid, gids)
    found = shell_apparatus(cfg, pid, cwd) if shell_switch else None
    if found is not None:
        from shournal.capture.apparatus.recording import apparatus_collector

        return apparatus_collector(cfg, uid, gids, found)
    from shournal.capture.collector import Collector

    return Collector(cfg, uid, gids)


# -- per shell and per directory -------------------------------------------
#
# The preload library picks the helper options of a shell's next command
# line from <rundir>: setup-args.<shell pid> (written by `shournal apparatus
# on`, removed by `off`), else setup-args.apparatus when the working
# directory is at or below one of apparatus-paths (both kept by every
# listener from [apparatus] paths, see write_apparatus_args), else
# setup-args; when it chose one of the first two it tells the listener in
# the helper's environment (SHELL_SWITCH_VAR).  `on` also leaves apparatus-shell.<pid> with
# the shell's start time: a file of an earlier process with a reused pid is
# stale, and removed.


def _shell_of(pid: int | None) -> int | None:
    """The interactive shell whose command line this listener (or the
    daemon's forwarder ``pid``) records: _SHOURNAL_SHELL_PID of the
    environment the shell gave its helper (SHOURNAL_ENABLE exports it),
    when that process is a bash or zsh."""
    if pid is None:
        value = os.environ.get(SHELL_PID_VAR, "")
    else:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            return None
        key = SHELL_PID_VAR.encode() + b"="
        value = next((e[len(key):].decode("ascii", "replace") for e in env
                      if e.startswith(key)), "")
    if not value.isdigit():
        return None
    try:
        exe = os.path.basename(os.readlink(f"/proc/{value}/exe"))
    except OSError:
        return None
    return int(value) if exe.startswith(("bash", "zsh")) else None


def _start_time(pid: int) -> str | None:
    started = proc.start_time(pid)
    return None if started is None else str(started)


def _rundir() -> Path:
    from shournal import _paths

    return _paths.private_runtime_dir()


def _shell_files(shell: int) -> tuple[Path, Path]:
    """A shell's apparatus state file and its helper options file."""
    rundir = _rundir()
    return rundir / f"apparatus-shell.{shell}", rundir / f"{protocol.SETUP_ARGS_FILE}.{shell}"


def set_shell_state(cfg: Any, shell: int, on: bool) -> None:
    """`shournal apparatus on|off` for the shell ``shell``, from its next
    command line.  :raises OSError: the state cannot be written."""
    state, args = _shell_files(shell)
    if not on:
        args.unlink(missing_ok=True)
        state.unlink(missing_ok=True)
        return
    start = _start_time(shell)
    if start is None:
        raise OSError(f"no process {shell}")
    from shournal import _paths

    with open(_paths.open_private(state), "w", encoding="ascii") as fh:
        fh.write(start + "\n")
    from shournal.capture import setup_args

    setup_args.write_options(cfg, args, apparatus=True)


def shell_state(shell: int) -> bool:
    """Is `shournal apparatus on` in effect for the live shell ``shell``?
    (Files of an earlier process with that pid are removed.)"""
    state, args = _shell_files(shell)
    try:
        text = state.read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        text = None
    if text is not None and text == _start_time(shell) and args.exists():
        return True
    with_files = text is not None or args.exists()
    if with_files:
        args.unlink(missing_ok=True)
        state.unlink(missing_ok=True)
    return False


def write_apparatus_args(cfg: Any) -> None:
    """Keep <rundir>/apparatus-paths and setup-args.apparatus in step with
    [apparatus] paths (removed when there are none)."""
    from shournal.capture import setup_args

    rundir = _rundir()
    if not cfg.apparatus.paths:
        (rundir / protocol.APPARATUS_PATHS_FILE).unlink(missing_ok=True)
        return
    setup_args.write_options(cfg, rundir / protocol.SETUP_ARGS_APPARATUS_FILE, apparatus=True)
    setup_args.write_file(rundir / protocol.APPARATUS_PATHS_FILE,
                b"".join(os.fsencode(p) + b"\0" for p in cfg.apparatus.paths))


def _environ_of(pid: int | None, needed: str | None = None) -> dict[str, str]:
    """This listener's environment, or (the daemon) its forwarder's: the
    one the shell gave the helper.  With `needed`: empty unless that
    variable is set (the daemon asks once per command line, and the
    environment is rarely wanted: it is only parsed then)."""
    if pid is None:
        return dict(os.environ) if needed is None or needed in os.environ else {}
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    if needed is not None and b"\0" + os.fsencode(needed) + b"=" not in b"\0" + raw:
        return {}
    pairs = [e.split(b"=", 1) for e in raw.split(b"\0") if b"=" in e]
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(os.fsdecode(k), os.fsdecode(v))  # the first wins, as for getenv
    return out


def shell_apparatus(cfg: Any, pid: int | None = None, cwd: str = "") -> dict[str, Any] | None:
    """For a shell's command line recorded with its apparatus (the preload
    library chose the apparatus's helper options and says so in the
    helper's environment, SHELL_SWITCH_VAR): what the manifest needs of the
    shell (its umask and environment), else None."""
    env = _environ_of(pid, SHELL_SWITCH_VAR)
    if env.get(SHELL_SWITCH_VAR) != "1":
        return None
    env.pop(SHELL_SWITCH_VAR, None)
    out: dict[str, Any] = {"argv": None, "env": env}
    shell = _shell_of(pid)
    if shell is None:
        return out
    try:
        shell_state(shell)  # a stale file of an earlier shell is removed here
        with open(f"/proc/{shell}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    out["umask"] = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return out
