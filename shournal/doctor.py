"""`shournal doctor`: everything a recording needs, each with its fix.

"No results" was the original's most common complaint; every check here is
a reason why nothing would have been recorded.
"""

from __future__ import annotations

import grp
import os
import stat
import subprocess
from dataclasses import dataclass

from shournal import _paths

GROUP = "shournal"


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _helper_checks() -> list[Check]:
    helper = _paths.suid_helper()
    try:
        st = os.stat(helper)
    except OSError as exc:
        return [Check("setuid helper", False, f"{helper}: {exc.strerror}", "sudo make install")]
    checks = []
    setuid = st.st_uid == 0 and bool(st.st_mode & stat.S_ISUID)
    checks.append(
        Check(
            "setuid helper",
            setuid,
            f"{helper} owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}",
            f"sudo chown root {helper} && sudo chmod 4755 {helper}",
        )
    )
    nosuid = bool(os.statvfs(helper).f_flag & os.ST_NOSUID)
    checks.append(
        Check(
            "mount allows setuid",
            not nosuid,
            f"{helper} is on a {'nosuid' if nosuid else 'suid-capable'} mount",
            "install shournal on a file system mounted without nosuid",
        )
    )
    try:
        out = subprocess.run(
            [str(helper), "check"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        checks.append(Check("kernel support", False, str(exc), "see the README"))
        return checks
    results = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    fan = results.get("fanotify", results.get("unshare", "FAIL not checked"))
    checks.append(
        Check(
            "mount namespace + fanotify mount marks",
            fan == "ok",
            fan,
            "needs CAP_SYS_ADMIN for the helper (in containers: --cap-add SYS_ADMIN) "
            "and a kernel with fanotify",
        )
    )
    join = results.get("join", "FAIL not checked")
    checks.append(
        Check(
            "programs can join a command's namespace",
            join == "ok",
            join,
            "needs CAP_SYS_PTRACE for the helper (in containers: --cap-add SYS_PTRACE)",
        )
    )
    return checks


def _group_check() -> Check:
    try:
        group = grp.getgrnam(GROUP)
    except KeyError:
        return Check("group", False, f"group '{GROUP}' missing", f"sudo groupadd --system {GROUP}")
    member = group.gr_gid in os.getgroups() or os.getgid() == group.gr_gid
    return Check(
        "group",
        not member,
        f"group '{GROUP}' exists" + (" but you are a member" if member else ""),
        f"nobody may be a member of '{GROUP}': sudo gpasswd -d $USER {GROUP}",
    )


def _file_check(name: str, path: os.PathLike[str], mode: int) -> Check:
    ok = os.access(path, mode)
    return Check(name, ok, str(path), "sudo make install")


def _shell_check() -> Check:
    enabled = bool(os.environ.get("SHOURNAL_SESSION_ID"))
    return Check(
        "recording in this shell",
        enabled,
        "enabled" if enabled else "SHOURNAL_ENABLE has not run in this shell",
        "add the lines printed by `shournal init bash` (or zsh) to your rc file "
        "and open a new shell",
    )


def _config_check() -> Check:
    from shournal.config import ConfigError, load_config

    try:
        load_config()
    except ConfigError as exc:
        return Check("config", False, str(exc), f"edit {_paths.config_file()}")
    return Check("config", True, str(_paths.config_file()))


def _store_check() -> Check:
    from shournal.store import Store, StoreError

    url = os.environ.get("SHOURNAL_DB_URL") or None
    try:
        store = Store(url)
        store.close()
    except StoreError as exc:
        return Check("store", False, str(exc), "see `shournal doctor` in the README")
    except Exception as exc:  # noqa: BLE001 - report anything as one line
        return Check("store", False, str(exc).splitlines()[0], "check SHOURNAL_DB_URL / [store]")
    return Check("store", True, url or str(_paths.default_db_path()))


def _daemon_check() -> Check:
    """The store daemon and its spool's backlog (shournal.daemon)."""
    import json

    from shournal import protocol, spool

    answer = protocol.daemon_request(_paths.runtime_dir(), protocol.MSG_STATUS, timeout=2.0)
    if answer is None:
        waiting, _ = spool.backlog_of()
        detail = "not running (the next command line starts it)"
        if waiting:
            detail += f"; {waiting} command(s) in the spool, stored once it runs"
        return Check("store daemon", True, detail)
    try:
        status = json.loads(answer[1])
    except ValueError:
        return Check("store daemon", False, "answers, but not with a status", "")
    waiting, _ = spool.backlog_of()
    detail = f"running (pid {status.get('pid')}), {waiting} command(s) waiting in the spool"
    error = status.get("error")
    if error:
        return Check(
            "store daemon",
            False,
            f"{detail}; {error}",
            "the commands are kept in the spool until the journal is usable (see the store check)",
        )
    return Check("store daemon", True, detail)


def run_checks() -> list[Check]:
    checks = _helper_checks()
    checks.append(_group_check())
    checks.append(_file_check("preload library", _paths.preload_lib(), os.R_OK))
    checks.append(_file_check("listener", _paths.listener(), os.X_OK))
    checks.append(_config_check())
    checks.append(_store_check())
    checks.append(_daemon_check())
    checks.append(_shell_check())
    return checks


def print_report(checks: list[Check]) -> bool:
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        if not c.ok and c.fix:
            print(f"     fix: {c.fix}")
    failed = [c for c in checks if not c.ok]
    if failed:
        print(f"{len(failed)} problem(s): commands are not recorded until they are fixed.")
    else:
        print("Everything needed for recording is in place.")
    return not failed
