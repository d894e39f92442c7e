"""The recorder's behaviour list, each in a real bash 5.2 and zsh 5.9 on a
pty, as an unprivileged user, through the setuid helper and real fanotify."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from fixtures_shell import Shell, journal_url, recorded, write_config
from sqlalchemy import select

from shournal.store import Store
from shournal.store.models import Content

pytestmark = [pytest.mark.shell, pytest.mark.root]

SHELLS = ["bash", "zsh"]


def only_command(home: Path, **criteria):
    found = recorded(home, **criteria)
    assert len(found) == 1, [c.text for c in found]
    return found[0]


def as_user(install, *argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", install.user.pw_name, "--", *argv], check=True, **kw
    )


@pytest.mark.parametrize("kind", SHELLS)
def test_redirections_find_exactly_the_command(kind, install, user_home):
    work = user_home / "work"
    templates = [
        "echo '%' > {f}",
        "(echo foo2 ) > {f}",
        "(echo foo3 > {f})",
        "/bin/echo foo4 > {f}",
        "sh -c 'echo foo5 > {f}'",
        "echo foo6 > {f} & wait",
        "(echo foo7 & wait ) > {f}",
        "(echo foo8 > {f}) & wait",
        "/bin/echo foo9 > {f} & wait",
        "sh -c 'echo foo10 > {f} & wait'",
    ]
    sh = Shell(kind, install, user_home)
    typed = []
    for i, template in enumerate(templates):
        line = template.format(f=work / f"f{i}")
        typed.append(line)
        sh.run(line)
    sh.exit()
    for i, line in enumerate(typed):
        cmd = only_command(user_home, wfile=work / f"f{i}")
        assert cmd.text == line
        assert cmd.return_value == 0 if hasattr(cmd, "returnValue") else True


@pytest.mark.parametrize("kind", SHELLS)
def test_path_spellings_resolve_to_the_same_file(kind, install, user_home):
    work = user_home / "work"
    (work / "d").mkdir()
    os.chown(work / "d", install.user.pw_uid, install.user.pw_gid)
    rel_from_root = str(work / "d" / "f1").lstrip("/")
    lines = [
        f"echo a1 > /{work}/d/f1",
        f"cd /; echo a2 > /{work}/d/f1",
        f"cd {work}/d; echo a3 > f1",
        f"cd {work}/d; echo a4 > ./f1",
        f"cd {work}/d; echo a5 > ../d/f1",
        f"cd /; echo a6 > {rel_from_root}",
    ]
    sh = Shell(kind, install, user_home)
    store_texts = []
    for line in lines:
        sh.run(line)
        store_texts.append(line)
        # each spelling must be found by the file's current content
        time.sleep(0.01)
    sh.exit()
    cmd = only_command(user_home, wfile=work / "d" / "f1")
    assert cmd.text == lines[-1]
    texts = {c.text for c in recorded(user_home, command_text="%> %f1")}
    assert texts == set(lines)
    for c in recorded(user_home, command_text="%> %f1"):
        assert [e.path for e in c.writes] == [os.fsencode(work / "d" / "f1")]


@pytest.mark.parametrize("kind", SHELLS)
def test_cat_of_various_sizes_found_by_content(kind, install, user_home):
    work = user_home / "work"
    sizes = [0, 510, 4096, 21567, 101978]
    for size in sizes:
        (work / f"src{size}").write_bytes(os.urandom(size))
    sh = Shell(kind, install, user_home)
    for size in sizes:
        sh.run(f"cat src{size} > out{size}")
        time.sleep(0.02)  # distinct mtimes for the empty files
    sh.exit()
    for size in sizes:
        cmd = only_command(user_home, wfile=work / f"out{size}")
        assert cmd.text == f"cat src{size} > out{size}"


@pytest.mark.parametrize("kind", SHELLS)
def test_read_events_and_executables(kind, install, user_home):
    work = user_home / "work"
    as_user(install, "touch", str(work / "foo1"))
    as_user(install, "cp", "/bin/echo", str(work / "echo"))
    write_config(
        user_home,
        f'[read_events]\ninclude_paths = ["{work}"]\n',
        install,
    )
    sh = Shell(kind, install, user_home)
    sh.run(f"cat {work}/foo1")
    sh.run(f"{work}/echo exec_trace_test")
    sh.run(f"env {work}/echo exec_trace_test2")
    sh.exit()
    cat = only_command(user_home, command_text=f"cat {work}/foo1")
    assert [(e.path, e.size) for e in cat.reads] == [(os.fsencode(work / "foo1"), 0)]
    assert cat.reads[0].content_id is None
    for text in (f"{work}/echo exec_trace_test", f"env {work}/echo exec_trace_test2"):
        cmd = only_command(user_home, command_text=f"eq:{text}")
        assert [e.path for e in cmd.reads] == [os.fsencode(work / "echo")]


@pytest.mark.parametrize("kind", SHELLS)
def test_script_archived_once(kind, install, user_home):
    work = user_home / "work"
    script = work / "foo1.sh"
    script.write_text("abcdefg")
    os.chown(script, install.user.pw_uid, install.user.pw_gid)
    sh = Shell(kind, install, user_home)
    sh.run(f"cat {script}")
    sh.run(f"cat {script} > /dev/null")
    sh.exit()
    cmds = recorded(user_home, command_text=f"cat {script}%")
    assert len(cmds) == 2
    for cmd in cmds:
        (ev,) = cmd.reads
        assert ev.content_id is not None
    store = Store(journal_url(user_home))
    try:
        with store.reading() as conn:
            contents = [bytes(r[0]) for r in conn.execute(select(Content.data))]
    finally:
        store.close()
    assert contents == [b"abcdefg"]


WORKLOADS = {
    "pipeline": ("cat in1 | tee pipe_out > /dev/null", ["pipe_out"]),
    "stderr": ("ls in1 nonexist > both_out 2>&1", ["both_out"]),
    "heredoc": ("cat > heredoc_out <<EOF\nline1\nEOF", ["heredoc_out"]),
    "loop200": (
        "for i in $(seq 1 200); do echo $i > many_$i; done",
        [f"many_{i}" for i in (1, 77, 200)],
    ),
    "xargs": ("echo xa1 xa2 | xargs touch", ["xa1", "xa2"]),
    "find_exec": ("find . -name in1 -exec cp {} find_out \\;", ["find_out"]),
    "python": ("python3 -c \"open('py_out','w').write('py')\"", ["py_out"]),
    "sed_i": ("cp in1 sed_file; sed -i s/hello/bye/ sed_file", ["sed_file"]),
    "tar": ("tar xf in.tar", ["tar_member"]),
    "spaces": ("echo s > 'name with spaces'", ["name with spaces"]),
    "newline": ("echo n > $'new\\nline'", ["new\nline"]),
    "non_utf8": ("echo u > $'bad\\xff\\xfename'", [b"bad\xff\xfename"]),
    "devshm": ("echo shm > /dev/shm/shournal_test_{uid}", ["/dev/shm/shournal_test_{uid}"]),
}


@pytest.mark.parametrize("kind", SHELLS)
def test_workloads(kind, install, user_home):
    work = user_home / "work"
    (work / "in1").write_text("hello world\n")
    (work / "tar_member").write_text("member\n")
    subprocess.run(["tar", "cf", "in.tar", "tar_member"], cwd=work, check=True)
    (work / "tar_member").unlink()
    subprocess.run(["chown", "-R", f"{install.user.pw_uid}", str(work)], check=True)
    sh = Shell(kind, install, user_home)
    uid = install.user.pw_uid
    for line, _outputs in WORKLOADS.values():
        sh.run(line.format(uid=uid) if "{uid}" in line else line)
    sh.exit()
    try:
        for name, (line, outputs) in WORKLOADS.items():
            typed = line.format(uid=uid) if "{uid}" in line else line
            for out in outputs:
                if isinstance(out, bytes):
                    path = Path(os.fsdecode(bytes(work) + b"/" + out))
                else:
                    out = out.format(uid=uid)
                    path = Path(out) if out.startswith("/") else work / out
                found = [c.text for c in recorded(user_home, wfile=path)]
                assert typed in found, (name, path, found)
    finally:
        Path(f"/dev/shm/shournal_test_{uid}").unlink(missing_ok=True)


@pytest.mark.parametrize("kind", SHELLS)
def test_exit_status_false_and_ctrl_c(kind, install, user_home):
    """The interrupt is sent once `sleep` runs: after a fixed delay it may,
    on a loaded machine, reach the shell before it has read the line (the
    terminal discards the line: nothing to store).  Earlier moments are
    tested in tests/system/test_shell_robustness.py."""
    line = "sleep 30.5"  # a command line no other test's process has
    sh = Shell(kind, install, user_home)
    sh.run("false")
    sh.proc.sendline(line)
    sh.wait_program(line)
    sh.proc.sendintr()
    sh.proc.expect("__SHOURNAL_PROMPT__")
    sh.exit()
    assert only_command(user_home, command_text="false").return_value == 1
    assert only_command(user_home, command_text=line).return_value == 130


@pytest.mark.parametrize("kind", SHELLS)
def test_two_shells_at_once(kind, install, user_home):
    work = user_home / "work"
    a = Shell(kind, install, user_home)
    b = Shell(kind, install, user_home)
    for i in range(5):
        a.proc.sendline(f"for j in 1 2 3; do echo a{i}$j > a_{i}_$j; done; sleep 0.1")
        b.proc.sendline(f"for j in 1 2 3; do echo b{i}$j > b_{i}_$j; done; sleep 0.1")
        a.proc.expect("__SHOURNAL_PROMPT__")
        b.proc.expect("__SHOURNAL_PROMPT__")
    a.exit()
    b.exit()
    for who, _sh in (("a", a), ("b", b)):
        for i in range(5):
            cmd = only_command(user_home, wfile=work / f"{who}_{i}_2")
            assert cmd.text.startswith(f"for j in 1 2 3; do echo {who}{i}")
            paths = sorted(e.path for e in cmd.writes)
            assert paths == [os.fsencode(work / f"{who}_{i}_{j}") for j in (1, 2, 3)]
    sessions = {c.session_uuid for c in recorded(user_home, command_text="for j in%")}
    assert len(sessions) == 2


@pytest.mark.parametrize("kind", SHELLS)
def test_event_cap_counts_what_was_dropped(kind, install, user_home):
    write_config(user_home, "[write_events]\nmax_event_count = 5000\n", install)
    sh = Shell(kind, install, user_home)
    sh.run("mkdir many && cd many && seq 1 20000 | xargs touch && cd ..", timeout=300)
    sh.exit()
    cmd = only_command(user_home, command_text="mkdir many%")
    # nothing lost silently: either every event beyond the cap is counted,
    # or a kernel queue overflow (a loaded machine) was detected and recorded
    if cmd.lost_events == 0:
        assert len(cmd.writes) == 5000 and cmd.dropped_writes == 15000
    else:
        assert len(cmd.writes) <= 5000 and cmd.dropped_writes < 15000


@pytest.mark.parametrize("kind", SHELLS)
def test_query_right_after_the_command_sees_it(kind, install, user_home):
    sh = Shell(kind, install, user_home)
    sh.run("echo quick > quick_file")
    out = sh.run("shournal query --wfile quick_file")
    sh.exit()
    assert "echo quick > quick_file" in out, out


@pytest.mark.parametrize("kind", SHELLS)
def test_pasted_lines_each_hash_their_own_content(kind, install, user_home):
    """Lines pasted at once overwrite the same file back to back: each
    command's write is hashed as that command left the file (the shell
    syncs with the previous holder before the next line), and a burst of
    listeners (throttled by the preload) stores every command."""
    import xxhash
    from fixtures_shell import PROMPT

    sh = Shell(kind, install, user_home)
    lines = [f"echo {'x' * (i + 1)} > pasted" for i in range(20)]
    sh.proc.send("\n".join(lines) + "\n")
    for _ in lines:
        sh.proc.expect(PROMPT, timeout=60)
    sh.exit()
    for i, line in enumerate(lines):
        (cmd,) = recorded(user_home, command_text=f"eq:{line}")
        (ev,) = cmd.writes
        content = b"x" * (i + 1) + b"\n"
        assert (ev.size, ev.hash) == (len(content), xxhash.xxh64_intdigest(content)), line
