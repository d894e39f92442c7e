"""`shournal run`: observe one command and its whole process tree without
shell integration (scripts, cron, cluster jobs).

Same mechanism as the shell: the helper makes the namespace and becomes the
listener; the command enters the namespace through the exec trampoline and
inherits the control socket, so the listener sees EOF only after the last
descendant has exited.  We wait for the listener too, so the command is
stored when `shournal run` returns.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

from shournal import _paths
from shournal.capture import protocol


class RunError(Exception):
    """The command itself could not be started (exit status 126/127)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def _warn(message: str) -> None:
    print(f"shournal: {message}", file=sys.stderr)


def _helper_options(apparatus: bool, env: dict[str, str]) -> list[str]:
    """The helper's options from the config; `env`: the helper's (and the
    listener's) environment."""
    from shournal.config import ConfigError, helper_options, load_config

    try:
        opts = helper_options(load_config(), apparatus=apparatus)
    except ConfigError as exc:
        # Said here, where the user looks; the listener, told so, leaves no
        # warning for some later shell's prompt.
        _warn(" ".join(f"config error, using defaults: {exc}".split()))
        env[protocol.CONFIG_REPORTED_VAR] = "1"
        opts = []
    if os.environ.get("SHOURNAL_BENCH_FLOOR") == "1":
        # bench/: the holder drops every event unseen (the kernel's price
        # alone).  Never quietly: this command is not recorded.
        _warn("SHOURNAL_BENCH_FLOOR=1: file events are discarded (benchmark floor)")
        opts.append("--discard-events")
    return opts


def _start_helper(sock_child: socket.socket, apparatus: dict[str, object] | None) -> int:
    """Spawn the helper with the socket on fd 3; return its pid.
    ``apparatus``: record the command with its apparatus (what the
    listener needs to know, see shournal.capture.apparatus.ENV_VAR)."""
    helper, listener = _paths.suid_helper(), _paths.listener()
    # Move the socket above 3 first: dup2(3, 3) would keep its CLOEXEC flag.
    high = fcntl.fcntl(sock_child.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
    from shournal.capture.apparatus import ENV_VAR, SHELL_SWITCH_VAR

    env = dict(os.environ)
    env.pop(ENV_VAR, None)  # only --apparatus sets it
    env.pop(SHELL_SWITCH_VAR, None)  # only the preload library sets it
    if apparatus is not None:
        # For the listener, which inherits the helper's environment (the
        # command gets os.environ through the trampoline).
        mask = os.umask(0)
        os.umask(mask)
        env[ENV_VAR] = json.dumps({**apparatus, "umask": mask})
    opts = _helper_options(apparatus is not None, env)
    try:
        return os.posix_spawn(
            str(helper),
            [str(helper), "setup", *opts, "--lazy-listener", "--", str(listener)],
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDWR, 0),
                (os.POSIX_SPAWN_DUP2, 0, 1),
                (os.POSIX_SPAWN_DUP2, 0, 2),
                (os.POSIX_SPAWN_DUP2, high, protocol.FD_SOCKET),
            ],
            setsid=True,  # Ctrl-C on the command must not kill the listener
        )
    finally:
        os.close(high)


def run_observed(argv: list[str], *, apparatus: bool = False,
                 archive_outputs: bool = False, derived_from: int | None = None) -> int:
    """Run argv observed; return its exit status (128+N for signal N).
    ``apparatus``: record it with its apparatus (shournal.capture.apparatus);
    ``archive_outputs``: with the content of the files it wrote;
    ``derived_from``: with the apparatus, the command it derives from
    (`shournal rerun --in-place`)."""
    if not argv:
        raise RunError("no command given", 2)
    filename = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    if filename is None:
        raise RunError(f"{argv[0]}: command not found", 127)
    text = shlex.join(argv)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    start_ns = time.time_ns()
    helper: int | None
    try:
        spec: dict[str, object] = {"argv": list(argv)}
        if archive_outputs:
            spec["archive_outputs"] = True
        if derived_from is not None:
            spec["derived_from"] = derived_from
        helper = _start_helper(child, spec if apparatus else None)
    except OSError as exc:
        helper = None
        _warn(f"not recording: {exc.strerror}")
    child.close()
    setup = None
    if helper is not None:
        try:
            parent.settimeout(10)
            setup = protocol.recv_setup(parent)
            os.close(setup.root_fd)  # the trampoline needs only the holder
            os.close(setup.ns_fd)
            os.close(setup.sync_fd)  # we wait for the listener itself
        except (protocol.ProtocolError, OSError) as exc:
            _warn(f"not recording: {exc}")
            setup = None
    if setup is None:
        parent.close()
        if helper is not None:
            os.waitpid(helper, 0)
        return _status(subprocess.call(argv))

    env = [f"{k}={v}" for k, v in os.environ.items()]
    tramp = [str(_paths.suid_helper()), "exec", str(setup.holder_pid), filename, str(len(env))]
    # The command must hold the socket: that is how we learn it has ended.
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_quit = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(
            [*tramp, *env, *argv],
            pass_fds=(parent.fileno(),),
            restore_signals=True,
            preexec_fn=lambda: (
                signal.signal(signal.SIGINT, signal.SIG_DFL),
                signal.signal(signal.SIGQUIT, signal.SIG_DFL),
            ),
        )
        status = _status(proc.wait())
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGQUIT, old_quit)
    msg = protocol.CommandMessage(
        status, start_ns, time.time_ns(), bytes(16), text.encode(), uuid=uuid.uuid4().bytes
    )
    try:
        protocol.send_command(parent, msg)
    except OSError:
        _warn("listener is gone; command not recorded")
    parent.close()
    # The listener is our child (the helper exec'd it); it exits once every
    # descendant is gone and the command is stored.
    _, wstatus = os.waitpid(helper, 0)
    _report_store(os.waitstatus_to_exitcode(wstatus))
    if apparatus:
        _show_apparatus_summary(helper)
    return status


def _report_store(listener_status: int) -> None:
    """One line when the listener could not store the command (it has no
    terminal; its status says what happened)."""
    from shournal.capture.listener import EXIT_KEPT

    if listener_status == 0:
        return
    if listener_status != EXIT_KEPT:
        _warn("the command was not recorded (see the warnings of the next prompt)")
        return
    from shournal.errors import journal_condition
    from shournal.location import resolve_url
    from shournal.store import Store

    why = "the journal was not usable"
    try:
        Store(resolve_url(), create=True).close()
    except Exception as exc:  # noqa: BLE001 - any reason becomes its one-line name
        why = journal_condition(exc).splitlines()[0]
    _warn(f"{why}; the command is kept in the spool and stored once the journal is usable")


def _show_apparatus_summary(listener_pid: int) -> None:
    """The listener's one line on what it archived and what not."""
    from shournal.capture.apparatus import summary_path

    path = summary_path(listener_pid)
    try:
        with open(path, encoding="utf-8") as fh:
            line = fh.readline().strip()
        os.unlink(path)
    except OSError:
        _warn("apparatus: the listener left no summary (see the warnings of the next prompt)")
        return
    _warn(line)
