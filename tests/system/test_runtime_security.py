"""Attacks on shournal's files outside the setuid helper, by one
unprivileged user against another: the runtime directory in /tmp, the
journal directory (the Docker edition's /journal), the restore directory,
the HTML report's temporary file, and terminal escapes in journal text.

Attacks on fixed names in /tmp run with a private /tmp (tmpfs) in new mount
and PID namespaces: the real /tmp of this machine is left alone, and PIDs
start at 1, so planting one link per PID of a range covers every process the
scenario starts (the victim's listener, the query).  fs.protected_symlinks
is not relied on: the planted links are in directories that are not
world-writable-and-sticky, where it does not apply anyway.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fixtures_cli import run_shournal
from fixtures_shell import REPO, Install, journal_url, write_config

from shournal.journal import Journal
from shournal.record import CommandRecord, FileEvent

# Links planted per PID: far more processes than any scenario here starts.
PLANTED_PIDS = range(1, 3000)
# OSC 52: sets the clipboard of the terminal that shows it (BEL ends it).
OSC52 = "\x1b]52;c;aGk=\x07"
STORING_HINT = "still being stored"


@dataclass
class Step:
    argv: Sequence[str]
    cwd: Path | None = None
    umask: int = 0o022


@dataclass
class Result:
    rc: int
    out: str
    err: str


@dataclass
class Scenario:
    """Steps run one after another, as root unless their argv says
    otherwise, with a private /tmp; their results are kept outside it."""

    steps: list[Step] = field(default_factory=list)

    def add(self, argv: Sequence[str], cwd: Path | None = None, umask: int = 0o022) -> int:
        self.steps.append(Step(argv, cwd, umask))
        return len(self.steps) - 1

    def run(self) -> list[Result]:
        out = Path(tempfile.mkdtemp(prefix="shournal-scenario-", dir="/var/tmp"))
        try:
            lines = ["mount -t tmpfs -o mode=1777 tmpfs /tmp"]
            if REPO.is_relative_to("/tmp"):
                # a checkout under /tmp (a CI clone) stays visible
                keep = shlex.quote(str(out / "repo"))
                repo = shlex.quote(str(REPO))
                lines = [f"mkdir {keep}", f"mount --bind {repo} {keep}", *lines,
                         f"mkdir -p {repo}", f"mount --bind {keep} {repo}"]  # fmt: skip
            for i, step in enumerate(self.steps):
                cd = f"cd {shlex.quote(str(step.cwd))} && " if step.cwd else ""
                lines.append(
                    f"({cd}umask {step.umask:03o} && exec {shlex.join(step.argv)})"
                    f" </dev/null >{out}/{i}.out 2>{out}/{i}.err; echo $? >{out}/{i}.rc"
                )
            subprocess.run(
                ["unshare", "--mount", "--pid", "--fork", "--mount-proc",
                 "--propagation", "private", "sh", "-uc", "\n".join(lines)],
                check=True, timeout=600,
            )  # fmt: skip
            return [
                Result(
                    int((out / f"{i}.rc").read_text()),
                    (out / f"{i}.out").read_text(errors="replace"),
                    (out / f"{i}.err").read_text(errors="replace"),
                )
                for i in range(len(self.steps))
            ]
        finally:
            shutil.rmtree(out, ignore_errors=True)


def as_user(install: Install, user, home: Path, *argv: str, **env: str) -> list[str]:
    """argv running ARGV as ``user`` with the test environment of ``home``."""
    full = install.env(home)
    full.update(USER=user.pw_name, LOGNAME=user.pw_name, **env)
    return ["runuser", "-u", user.pw_name, "--", "env", "-i",
            *[f"{k}={v}" for k, v in full.items()], *argv]  # fmt: skip


def shournal_as(install: Install, user, home: Path, *argv: str, **env: str) -> list[str]:
    return as_user(install, user, home, str(install.cli), *argv, **env)


def listener_warns_as(install: Install, user, home: Path, **env: str) -> list[str]:
    """argv: the recorder's own warning (shournal.capture.listener._warn,
    which every listener and daemon warning goes through) as ``user``.
    `shournal run` says a config error itself now, so a broken config no
    longer makes its listener leave a warning for the shell."""
    python = install.listener.parent / "python"
    interp = str(python) if python.exists() else "/usr/bin/python3"
    code = ("from shournal.capture.listener import _warn\n"
            "_warn('config error, using defaults: planted by the test')")
    return as_user(install, user, home, interp, "-c", code, **env)


def python_as(user, code: str) -> list[str]:
    return ["runuser", "-u", user.pw_name, "--", "/usr/bin/python3", "-c", code]


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith("shournal: "), text
    return lines[0]


@pytest.fixture
def precious(install: Install, user_home: Path) -> Path:
    """A private file of the victim that an attacker would like overwritten."""
    path = user_home / "precious"
    path.write_text("precious\n")
    os.chown(path, install.user.pw_uid, install.user.pw_gid)
    path.chmod(0o600)
    return path


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory both users may write (not sticky)."""
    path = Path(tempfile.mkdtemp(prefix="shournal-shared-", dir="/var/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def repair_config(install: Install, home: Path) -> list[str]:
    """argv: the victim empties the broken config that made his listener
    warn, so that the queries after it can tell which journal to read."""
    config = home / ".config" / "shournal" / "config.toml"
    return as_user(install, install.user, home, "sh", "-c", f": > {shlex.quote(str(config))}")


def _plant_links(directory: str, pattern: str, target: Path) -> str:
    """Python code: one symlink per planted PID, ``pattern`` % pid -> target."""
    return (
        "import os\n"
        f"for pid in range({PLANTED_PIDS.start}, {PLANTED_PIDS.stop}):\n"
        f"    os.symlink({str(target)!r}, os.path.join({directory!r}, {pattern!r} % pid))\n"
    )


# -- 5: the runtime directory -------------------------------------------------


@pytest.mark.usefixtures("links_unprotected")
def test_runtime_dir_squatted_in_tmp_is_not_used(install, user_home, precious):
    """Without XDG_RUNTIME_DIR the runtime dir is /tmp/shournal-<uid>.  The
    other user makes it first (mode 0777) and plants links for the
    listener's setup-args temporary file, a `warnings` file of his own and
    a marker of a live process: the victim's listener must neither write
    through the links nor append to his file, and the victim's query must
    not count the marker -- recording goes on without the runtime dir."""
    victim, other = install.user, install.other
    rundir = f"/tmp/shournal-{victim.pw_uid}"
    write_config(user_home, "this is [not toml\n", install)  # the listener warns
    plant = (
        f"import os\nos.mkdir({rundir!r})\nos.chmod({rundir!r}, 0o777)\n"
        f"open({rundir + '/warnings'!r}, 'w').close()\nos.chmod({rundir + '/warnings'!r}, 0o666)\n"
        f"open({rundir + '/1.end'!r}, 'w').close()\n"  # PID 1: alive, not the victim's
        + _plant_links(rundir, "setup-args.%d", precious)
    )
    no_xdg = {"XDG_RUNTIME_DIR": ""}
    work = user_home / "work"
    sc = Scenario()
    sc.add(python_as(other, plant))
    run = sc.add(shournal_as(install, victim, user_home, "run", "--", "sh", "-c",
                             "echo rec5 > out5", **no_xdg), cwd=work)  # fmt: skip
    sc.add(listener_warns_as(install, victim, user_home, **no_xdg), cwd=work)
    sc.add(repair_config(install, user_home))
    query = sc.add(shournal_as(install, victim, user_home, "query", "--command-text",
                               "no-such-command", **no_xdg), cwd=work)  # fmt: skip
    found = sc.add(shournal_as(install, victim, user_home, "query", "--wfile", "out5",
                               **no_xdg), cwd=work)  # fmt: skip
    warnings = sc.add(["cat", f"{rundir}/warnings"])
    res = sc.run()
    assert res[run].rc == 0, res[run].err
    assert precious.read_text() == "precious\n"
    assert res[warnings].rc == 0 and res[warnings].out == ""
    assert res[query].rc == 1 and STORING_HINT not in res[query].out, res[query].out
    line = one_line(res[query].err)
    assert rundir in line and "not used" in line
    # recording itself goes on without the runtime dir
    assert res[found].rc == 0 and "echo rec5 > out5" in res[found].out, res[found]


def test_runtime_dir_of_the_victim_is_used(install, user_home):
    """Positive control: the same warning and marker in the victim's own
    runtime dir do reach him (the channels the attack above abuses are
    live), and the listener's setup-args is a private regular file."""
    victim = install.user
    rundir = user_home / "run" / "shournal"
    write_config(user_home, "this is [not toml\n", install)
    work = user_home / "work"
    sc = Scenario()
    sc.add(as_user(install, victim, user_home, "mkdir", "-m", "700", str(rundir)))
    run = sc.add(shournal_as(install, victim, user_home, "run", "--", "sh", "-c",
                             "echo rec5 > out5"), cwd=work)  # fmt: skip
    sc.add(listener_warns_as(install, victim, user_home), cwd=work)
    sc.add(as_user(install, victim, user_home, "touch", f"{rundir}/1.end"))
    sc.add(repair_config(install, user_home))
    query = sc.add(shournal_as(install, victim, user_home, "query", "--command-text",
                               "no-such-command"), cwd=work)  # fmt: skip
    res = sc.run()
    assert res[run].rc == 0, res[run].err
    assert "config error" in (rundir / "warnings").read_text()
    assert res[query].rc == 1 and STORING_HINT in res[query].out, res[query].out
    st = (rundir / "setup-args").lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == victim.pw_uid
    assert stat.S_IMODE(st.st_mode) == 0o600
    st = rundir.lstat()
    assert st.st_uid == victim.pw_uid and stat.S_IMODE(st.st_mode) == 0o700


def test_runtime_dir_rules(tmp_path, monkeypatch, install):
    """The rules of setup_rundir() in native/preload/settings.c: made
    0700 if absent; used only if it is a directory (not a link to one) of
    this user without group or other permissions."""
    from shournal import _paths

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    rundir = tmp_path / "shournal"
    assert _paths.private_runtime_dir() == rundir
    assert stat.S_IMODE(rundir.stat().st_mode) == 0o700
    rundir.chmod(0o750)
    with pytest.raises(_paths.UnsafeDirectory, match="group or others"):
        _paths.private_runtime_dir()
    rundir.chmod(0o700)
    os.chown(rundir, install.other.pw_uid, -1)
    with pytest.raises(_paths.UnsafeDirectory, match=f"uid {install.other.pw_uid}"):
        _paths.private_runtime_dir()
    rundir.rename(tmp_path / "real")
    os.chown(tmp_path / "real", 0, -1)
    rundir.symlink_to(tmp_path / "real")
    with pytest.raises(_paths.UnsafeDirectory, match="symbolic link"):
        _paths.private_runtime_dir()
    rundir.unlink()
    with pytest.raises(FileNotFoundError):
        _paths.private_runtime_dir(create=False)


def test_listener_files_never_follow_links_in_its_own_runtime_dir(tmp_path, monkeypatch):
    """Belt and braces: even in a private runtime dir, setup-args (and its
    temporary file) and warnings are never written through a link."""
    from shournal.capture import listener
    from shournal.config import load_config

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    rundir = tmp_path / "shournal"
    rundir.mkdir(mode=0o700)
    target = tmp_path / "target"
    target.write_text("target\n")
    (rundir / f"setup-args.{os.getpid()}").symlink_to(target)
    (rundir / "warnings").symlink_to(target)
    listener._write_setup_args(load_config(path=None, create=False, defaults_only=True))
    listener._warn("a warning")
    assert target.read_text() == "target\n"
    assert stat.S_ISREG((rundir / "setup-args").lstat().st_mode)


# -- 6: the journal directory -------------------------------------------------


def _journal_link(install: Install, home: Path, target: Path) -> None:
    """The victim's data dir is a link into a shared directory (the Docker
    edition's ~/.local/share/shournal -> /journal/<user>)."""
    share = home / ".local" / "share"
    share.mkdir(parents=True)
    (share / "shournal").symlink_to(target)
    subprocess.run(["chown", "-R", "-h", f"{install.user.pw_uid}:{install.user.pw_gid}",
                    str(home / ".local")], check=True)  # fmt: skip


@pytest.mark.parametrize("squat", ["other user's", "world-writable"])
def test_journal_dir_made_by_another_user_is_refused(install, user_home, shared_dir, squat):
    """The other user creates the victim's journal directory first in the
    shared (1777) parent: the victim must neither store his commands there
    nor read a journal from it: one line, exit status 3."""
    victim, other = install.user, install.other
    shared_dir.chmod(0o1777)
    journal = shared_dir / victim.pw_name
    if squat == "other user's":
        subprocess.run(python_as(other, f"import os\nos.mkdir({str(journal)!r})\n"
                                 f"os.chmod({str(journal)!r}, 0o777)"), check=True)  # fmt: skip
    else:
        journal.mkdir()
        os.chown(journal, victim.pw_uid, victim.pw_gid)
        journal.chmod(0o777)
    _journal_link(install, user_home, journal)
    work = user_home / "work"
    sc = Scenario()
    run = sc.add(shournal_as(install, victim, user_home, "run", "--", "sh", "-c",
                             "echo secret6 > out6"), cwd=work)  # fmt: skip
    query = sc.add(shournal_as(install, victim, user_home, "query", "--history", "5"), cwd=work)
    res = sc.run()
    assert res[run].rc == 0, res[run].err
    assert os.listdir(journal) == []
    assert res[query].rc == 3 and res[query].out == ""
    assert str(journal) in one_line(res[query].err)
    warning = (user_home / "run" / "shournal" / "warnings").read_text()
    assert "command not stored" in warning and str(journal) in warning


def test_journal_dir_owned_by_the_victim_is_used(install, user_home, shared_dir):
    """Positive control: the same link to a directory of the victim's own
    (as the image makes them) is followed and works."""
    victim = install.user
    shared_dir.chmod(0o1777)
    journal = shared_dir / victim.pw_name
    journal.mkdir()
    os.chown(journal, victim.pw_uid, victim.pw_gid)
    _journal_link(install, user_home, journal)
    work = user_home / "work"
    sc = Scenario()
    sc.add(shournal_as(install, victim, user_home, "run", "--", "sh", "-c",
                       "echo secret6 > out6"), cwd=work)  # fmt: skip
    query = sc.add(shournal_as(install, victim, user_home, "query", "--history", "5"), cwd=work)
    res = sc.run()
    assert res[query].rc == 0 and "echo secret6 > out6" in res[query].out, res[query]
    assert (journal / "journal.sqlite").is_file()


# -- 7: the restore directory -------------------------------------------------

SECRET_SCRIPT = b"#!/bin/sh\necho secret-token-7\n"


@pytest.fixture
def victim_journal(install: Install, user_home: Path) -> str:
    """A journal of the victim with one archived script."""
    url = journal_url(user_home)
    Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    store = Journal.open(url, create=True)
    try:
        store.add(CommandRecord(
            text="sh secret.sh", return_value=0, start_ns=1_700_000_000 * 10**9,
            end_ns=1_700_000_001 * 10**9, working_dir="/home/u", username="u",
            hostname="box", session_uuid=b"\x01" * 16, hash_chunk_size=256,
            hash_max_reads=3, writes=[],
            reads=[FileEvent(path=b"/home/u/secret.sh", size=len(SECRET_SCRIPT),
                             mtime_ns=1_600_000_000 * 10**9, mode=0o100644, hash=5,
                             content=SECRET_SCRIPT)],
        ))  # fmt: skip
    finally:
        store.close()
    subprocess.run(["chown", "-R", f"{install.user.pw_uid}:{install.user.pw_gid}",
                    str(user_home / ".local")], check=True)  # fmt: skip
    return url


@pytest.mark.usefixtures("links_unprotected")
@pytest.mark.parametrize("squatted", [True, False], ids=["squatted", "control"])
def test_restore_dir_squatted_in_tmp_is_refused(install, user_home, victim_journal, squatted):
    """The other user makes /tmp/shournal-restore-<victim> first (0777) to
    read the victim's restored scripts: the victim's restore is refused
    (one line, status 2) and nothing is written.  Control: without the
    squat the default directory is made, private, and used."""
    victim, other = install.user, install.other
    dest = f"/tmp/shournal-restore-{victim.pw_name}"
    restored = f"{dest}/command-1/home/u/secret.sh"
    sc = Scenario()
    if squatted:
        sc.add(python_as(other, f"import os\nos.mkdir({dest!r})\nos.chmod({dest!r}, 0o777)"))
    restore = sc.add(shournal_as(install, victim, user_home, "query", "--history", "1",
                                 "--restore-rfiles"), cwd=user_home / "work")  # fmt: skip
    victim_reads = sc.add(as_user(install, victim, user_home, "cat", restored))
    other_reads = sc.add(python_as(other, f"print(open({restored!r}).read())"))
    listing = sc.add(["find", dest, "-printf", "%u %m %p\n"])
    res = sc.run()
    assert res[other_reads].rc != 0 and "secret-token-7" not in res[other_reads].out
    if squatted:
        assert res[restore].rc == 2, res[restore]
        assert dest in one_line(res[restore].err)
        assert res[listing].out == f"{other.pw_name} 777 {dest}\n"
    else:
        assert res[restore].rc == 0, res[restore].err
        assert res[victim_reads].out == SECRET_SCRIPT.decode()
        assert res[listing].out.splitlines()[0] == f"{victim.pw_name} 700 {dest}"


# -- 12: the HTML report's temporary file ----------------------------------------


@pytest.mark.usefixtures("links_unprotected")
def test_html_report_never_writes_through_a_planted_link(install, user_home, shared_dir,
                                                         precious):  # fmt: skip
    """The other user plants `.report.html.<pid>.tmp` links to the victim's
    file in a directory both may write; the victim's report must be a new
    file (mode from his umask) and his file unchanged."""
    victim, other = install.user, install.other
    report = shared_dir / "report.html"
    sc = Scenario()
    sc.add(python_as(other, _plant_links(str(shared_dir), ".report.html.%d.tmp", precious)))
    html = sc.add(shournal_as(install, victim, user_home, "query", "--history", "1",
                              "--output-format", "html", "-o", str(report)),
                  cwd=user_home / "work", umask=0o027)  # fmt: skip
    res = sc.run()
    assert res[html].rc == 1, res[html]  # no journal yet: an empty report
    assert precious.read_text() == "precious\n"
    st = report.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == victim.pw_uid
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert "<html" in report.read_text()
    # nothing left behind but the planted links
    leftovers = {p.name for p in shared_dir.iterdir()} - {"report.html"}
    assert leftovers == {f".report.html.{pid}.tmp" for pid in PLANTED_PIDS}


# -- 11: terminal escapes in journal text -----------------------------------------


def _raw_controls(text: str) -> set[str]:
    return {c for c in text if c not in "\t\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)}


def test_escapes_recorded_by_one_user_never_reach_the_readers_terminal(install, user_home,
                                                                         tmp_path):  # fmt: skip
    """The test user records commands whose text and read file name hold an
    OSC 52 sequence; whoever reads that journal (here root, an admin) sees
    them escaped in every human output: query, stats, delete --dry-run,
    restore messages."""
    attacker = install.user
    work = user_home / "work"
    script = work / f"x{OSC52}.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    os.chown(script, attacker.pw_uid, attacker.pw_gid)
    for argv in (["printf", f"{OSC52}\\n"], ["sh", script.name]):
        res = subprocess.run(shournal_as(install, attacker, user_home, "run", "--", *argv),
                             cwd=work, capture_output=True)  # fmt: skip
        assert res.returncode == 0, res.stderr
    # positive control: the journal holds the raw sequences
    store = Journal.open(journal_url(user_home), create=True)
    try:
        cmds = store.find(history=5)
    finally:
        store.close()
    assert any(OSC52 in c.text for c in cmds)
    (read,) = [ev for c in cmds for ev in c.reads if OSC52.encode() in ev.path]
    assert read.content_id is not None
    env = dict(os.environ, SHOURNAL_DB_URL=journal_url(user_home), TZ="UTC",
               XDG_RUNTIME_DIR=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))
    out = tmp_path / "out"
    out.mkdir()
    outputs = []
    for args in (
        ["query", "--history", "5"],
        ["query", "--command-text", "%52;c;%"],
        ["query", "--history", "5", "--restore-rfiles", "--restore-dir", str(out / "r")],
        ["query", "--history", "5", "--restore-rfiles", "--restore-dir", str(out / "r")],
        ["stats"],
        ["delete", "--dry-run", "--command-text", "%"],
        ["restore", "--file-id", str(read.id), "-o", str(out)],
        ["restore", "--file-id", str(read.id), "-o", str(out)],  # exists: an error
    ):
        res = run_shournal(args, env)
        assert res.returncode in (0, 2), (args, res.stderr)
        outputs.append(res)
        assert _raw_controls(res.stdout + res.stderr) == set(), (args, res)
    everything = "".join(r.stdout + r.stderr for r in outputs)
    assert "\\x1b]52;c;aGk=\\x07" in everything
    assert outputs[-1].returncode == 2 and "\\x1b]52" in outputs[-1].stderr
