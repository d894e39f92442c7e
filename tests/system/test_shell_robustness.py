"""shournal's shell code in a user's real shell: the user's options and
traps (errexit, nounset, pipefail, err_return, ERR/ZERR traps) never turn
against it, other prompt hooks in front of it do not change the exit status
it stores, an interrupt at any moment is stored as an interrupt, its own
runtime files are never journaled and long command lines are kept whole.
Real bash 5.2 and zsh 5.9 on a pty, as an unprivileged user, through the
setuid helper."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_shell import PROMPT, REPO, Shell, recorded, spool_of, wait_for, write_config

from shournal.data import RETURN_VALUE_UNKNOWN

pytestmark = [pytest.mark.shell, pytest.mark.root]

BASH_PREEXEC = REPO / "tests" / "vendor" / "bash-preexec.sh"


def only(home: Path, text: str):
    found = recorded(home, command_text=f"eq:{text}")
    assert len(found) == 1, (text, [c.text for c in recorded(home)])
    return found[0]


def clean(out: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out).replace("\r", "")


# ------------------------------------------------ the user's options and traps

# (option line, line that prints OPTON while the option is still in force);
# the markers (OPTON, the traps' TRAP-42) are made by the shell, so the
# echoed input never matches them.
OPTIONS = {
    "bash": {
        "errexit": ("set -e", '[[ $- == *e* ]] && echo OPT""ON'),
        "nounset": ("set -u", '[[ $- == *u* ]] && echo OPT""ON'),
        "pipefail": ("set -o pipefail", '[[ -o pipefail ]] && echo OPT""ON'),
        "all": ("set -euo pipefail", '[[ $- == *e*u* && -o pipefail ]] && echo OPT""ON'),
        "err_trap": ("trap 'echo TRAP-$((6*7))' ERR",
                     '[[ $(trap -p ERR) == *TRAP-* ]] && echo OPT""ON'),
        "err_trap_errtrace": ("set -E; trap 'echo TRAP-$((6*7))' ERR",
                              '[[ $- == *E* && $(trap -p ERR) == *TRAP-* ]] && echo OPT""ON'),
        "errexit_err_trap": ("set -eE; trap 'echo TRAP-$((6*7))' ERR",
                             '[[ $- == *e* && $(trap -p ERR) == *TRAP-* ]] && echo OPT""ON'),
    },
    "zsh": {
        "errexit": ("setopt errexit", '[[ -o errexit ]] && echo OPT""ON'),
        "nounset": ("setopt nounset", '[[ -o nounset ]] && echo OPT""ON'),
        "err_return": ("setopt err_return", '[[ -o errreturn ]] && echo OPT""ON'),
        "pipefail": ("setopt pipefail", '[[ -o pipefail ]] && echo OPT""ON'),
        "all": ("setopt errexit nounset err_return pipefail",
                '[[ -o errexit && -o nounset && -o errreturn ]] && echo OPT""ON'),
        "trapzerr": ("TRAPZERR() { echo TRAP-$((6*7)) }",
                     '(( $+functions[TRAPZERR] )) && echo OPT""ON'),
        "trap_zerr": ("trap 'echo TRAP-$((6*7))' ZERR",
                      '[[ $(trap) == *TRAP-* ]] && echo OPT""ON'),
        "errexit_trapzerr": ("setopt errexit; TRAPZERR() { echo TRAP-$((6*7)) }",
                             '[[ -o errexit ]] && (( $+functions[TRAPZERR] )) && echo OPT""ON'),
    },
}

CASES = [(k, o) for k in ("bash", "zsh") for o in OPTIONS[k]]


@pytest.mark.parametrize(("kind", "option"), CASES, ids=[f"{k}-{o}" for k, o in CASES])
def test_users_options_and_traps_do_not_turn_against_shournal(kind, option, install,
                                                               user_home):
    """The shell survives the option, the next commands are recorded with
    their own status, the option is still set afterwards, and the user's
    ERR trap fires for the user's commands only."""
    set_line, check = OPTIONS[kind][option]
    sh = Shell(kind, install, user_home)
    outs = [sh.run(set_line)]
    outs.append(sh.run("echo robust > out1"))
    assert sh.proc.isalive(), outs
    # a failing status that errexit leaves alone and no ERR trap sees
    outs.append(sh.run("! true"))
    outs.append(sh.run("echo again > out2"))
    checked = clean(sh.run(check))
    assert "OPTON" in checked, checked
    # the user's trap fired for none of these lines, so not for shournal's code
    assert "TRAP-42" not in clean("".join(outs) + checked), outs
    if "trap" in option and "errexit" not in option:
        # the user's own failing command: the trap fires exactly once
        fired = clean(sh.run("false"))
        assert fired.count("TRAP-42") == 1, fired
    sh.exit()
    out1 = only(user_home, "echo robust > out1")
    assert out1.return_value == 0
    assert [os.path.basename(e.path) for e in out1.writes] == [b"out1"]
    assert only(user_home, "! true").return_value == 1
    assert only(user_home, "echo again > out2").return_value == 0


def test_shell_survives_errexit_typed_as_first_command(install, user_home):
    """`set -e` and then Enter on an empty line, Ctrl-C at the prompt: every
    prompt runs shournal's hook again."""
    for kind, line in (("bash", "set -e"), ("zsh", "setopt errexit err_return nounset")):
        sh = Shell(kind, install, user_home)
        sh.run(line)
        sh.run("")
        sh.proc.sendintr()
        sh.proc.expect(PROMPT)
        out = clean(sh.run("echo still-$((40+2))"))
        assert "still-42" in out, out
        sh.exit()


def test_ctrl_c_right_after_a_prompt_draws_a_new_prompt(install, user_home):
    """The next line's namespace is prepared when the shell waits for input,
    right after its prompt: a Ctrl-C handled during that preparation must
    still interrupt the line editor's wait (readline and zle only note the
    signal in their handlers, and act on the note when the wait returns
    EINTR).  Bash still misses about one Ctrl-C in a hundred here, in a
    window not yet found: hence a bound, not none."""

    import pexpect

    rng = random.Random(7)
    for kind in ("bash", "zsh"):
        sh = Shell(kind, install, user_home)
        missed = []
        for i in range(30):
            sh.run("true")  # the namespace is used: the prompt prepares a new one
            time.sleep(rng.random() * 0.004)
            sh.proc.sendintr()
            if sh.proc.expect([PROMPT, pexpect.TIMEOUT], timeout=10) == 1:
                missed.append(i)
                sh.run("")  # a key wakes it
        out = clean(sh.run("echo still-$((40+2))"))
        assert "still-42" in out, out
        sh.exit()
        assert len(missed) <= 3, f"{kind}: no prompt after Ctrl-C in tries {missed}"


# --------------------------------------------------- other prompt hooks first

# The hooks write a file: once shournal's hook is first again, that is
# never a command line's.
STARSHIP_STYLE = {
    # a hook prepended to PROMPT_COMMAND that runs commands of its own
    "bash": '_st_precmd() { _st_status=$?; echo >> ~/hook_out; true; }\n'
            'PROMPT_COMMAND="_st_precmd;${PROMPT_COMMAND-}"\n',
    # a precmd function put in front of all others that runs `true`
    "zsh": '_st_precmd() { echo >> ~/hook_out; true; }\n'
           'precmd_functions=(_st_precmd $precmd_functions)\n',
}

# starship's own bash set-up: it replaces PROMPT_COMMAND and runs the old
# value from its hook, after commands of its own
STARSHIP_REPLACES = (
    'starship_precmd() { STARSHIP_CMD_STATUS=$?; true; eval "$_PRESERVED_PROMPT_COMMAND"; }\n'
    '_PRESERVED_PROMPT_COMMAND="${PROMPT_COMMAND-}"; PROMPT_COMMAND="starship_precmd"\n'
)

HOOKS = [
    ("bash", "starship-style-after", "", STARSHIP_STYLE["bash"]),
    ("bash", "starship-style-before", STARSHIP_STYLE["bash"], ""),
    ("bash", "starship-replaces-after", "", STARSHIP_REPLACES),
    ("bash", "bash-preexec-after", "", f"source {BASH_PREEXEC}\n"),
    ("bash", "bash-preexec-before", f"source {BASH_PREEXEC}\n", ""),
    ("bash", "bash-preexec-and-starship-after", "",
     f"source {BASH_PREEXEC}\n" + STARSHIP_STYLE["bash"]),
    ("bash", "array-prompt-command-after", "",
     "_st_precmd() { true; }\nPROMPT_COMMAND=(_st_precmd \"${PROMPT_COMMAND[@]}\")\n"),
    ("zsh", "precmd-first-after", "", STARSHIP_STYLE["zsh"]),
    ("zsh", "precmd-first-before", STARSHIP_STYLE["zsh"], ""),
]


@pytest.mark.parametrize(("kind", "name", "before", "after"), HOOKS,
                         ids=[f"{h[0]}-{h[1]}" for h in HOOKS])
def test_exit_status_survives_other_prompt_hooks(kind, name, before, after, install,
                                                  user_home):
    sh = Shell(kind, install, user_home, rc_extra=before, rc_after=after)
    sh.run("false")
    sh.run("true")
    sh.run("(exit 3)")
    sh.run("false")
    out = clean(sh.run("echo status=$?"))
    # the other hooks still see the command's status
    assert "status=1" in out, out
    sh.exit()
    found = [c for c in recorded(user_home) if not c.text.startswith("exit")]
    statuses = [(c.text, c.return_value) for c in found]
    assert statuses == [("false", 1), ("true", 0), ("(exit 3)", 3), ("false", 1),
                        ("echo status=$?", 0)], statuses
    for c in found:
        assert not [e.path for e in c.writes if e.path.endswith(b"hook_out")], c.text


@pytest.mark.parametrize("how", ["string", "array"])
def test_hook_added_by_a_command_line_never_stores_a_wrong_status(how, install, user_home):
    """A line that puts a hook in front of shournal's and then fails: in
    front within the same PROMPT_COMMAND string, the status shournal's hook
    sees is the other hook's: stored as unknown, never as its 0.  As an
    array element of its own, bash hands it the line's status too: stored
    as 1.  The following lines are right again."""
    add = {"string": 'PROMPT_COMMAND="_st_precmd;$PROMPT_COMMAND"',
           "array": 'PROMPT_COMMAND=(_st_precmd "${PROMPT_COMMAND[@]}")'}[how]
    sh = Shell("bash", install, user_home)
    sh.run(f"_st_precmd() {{ true; }}; {add}; false")
    sh.run("false")
    sh.run("true")
    sh.exit()
    (first,) = [c for c in recorded(user_home) if c.text.startswith("_st_precmd")]
    assert first.return_value == (RETURN_VALUE_UNKNOWN if how == "string" else 1)
    assert only(user_home, "false").return_value == 1
    assert only(user_home, "true").return_value == 0


# ------------------------------------------------- Ctrl-C at every moment

def _slow_setup_env(install, home: Path) -> dict[str, str]:
    """A helper path that sleeps before each `setup` (then execs the real
    setuid helper), so the shell is still setting up the command line when
    the interrupt arrives."""
    wrapper = home / "slow-suid"
    wrapper.write_text(
        f'#!/bin/sh\n[ "$1" = setup ] && sleep 0.5\nexec {install.helper} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {"SHOURNAL_SUID_PATH": str(wrapper)}


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_ctrl_c_right_after_enter_is_never_stored_as_success(kind, install, user_home):
    """Ctrl-C sent together with Enter, while the set-up is slowed down: the
    line is stored with the status the shell reports (130), or as unknown,
    never as 0.  (Should the shell itself lose the interrupt -- a window
    between its fork and the program's exec that any shell has -- the line
    runs to its end, says so, and then 0 is its true status.)"""
    sh = Shell(kind, install, user_home, extra_env=_slow_setup_env(install, user_home))
    lines = [f"sleep 30; echo not-interrupted-{i}" for i in range(4)]
    ran = set()
    for i, line in enumerate(lines):
        sh.proc.send(line + "\r")
        # the line editor has read (and echoed) the whole line: an interrupt
        # before that only aborts the editing, which is no command line
        sh.proc.expect_exact(f"echo not-interrupted-{i}", timeout=30)
        if i % 2:
            time.sleep(0.2)  # within the slowed set-up
        sh.proc.sendintr()
        sh.proc.expect(PROMPT, timeout=90)
        if f"not-interrupted-{i}" in clean(sh.proc.before).replace(line, ""):
            ran.add(line)
        sh.run("true")
    sh.exit()
    stored = [c for line in lines for c in recorded(user_home, command_text=f"eq:{line}")]
    # a line the interrupt took before the shell read it is not a command
    # line; those interrupted in the set-up are (the sleeping helper makes
    # sure some are)
    assert [c for c in stored if c.text not in ran]
    for cmd in stored:
        want = (0,) if cmd.text in ran else (130, RETURN_VALUE_UNKNOWN)
        assert cmd.return_value in want, (cmd.text, cmd.return_value)


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_ctrl_c_while_the_program_runs_is_130(kind, install, user_home):
    line = "sleep 31.25"  # a duration no other test's sleep has
    sh = Shell(kind, install, user_home)
    sh.proc.sendline(line)
    sh.wait_program(line)  # it runs (inside its namespace): only now the interrupt
    sh.proc.sendintr()
    sh.proc.expect(PROMPT)
    sh.exit()
    assert only(user_home, line).return_value == 130


INTERRUPTS = (signal.SIGINT, signal.SIGQUIT)


def _ignored_signals(status: str) -> set[int]:
    """The signals a /proc/PID/status text says are ignored."""
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M).group(1), 16)  # type: ignore[union-attr]
    return {sig for sig in range(1, 65) if mask >> (sig - 1) & 1}


@pytest.fixture
def runner_ignores_interrupts() -> Iterator[None]:
    """This test process as a test run started in the background of a
    script has it (a CI job's `&`, nohup): SIGINT and SIGQUIT ignored, which
    every program started from here inherits."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in INTERRUPTS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_ctrl_c_is_130_when_the_test_run_ignores_interrupts(
    kind, install, user_home, runner_ignores_interrupts
):
    """The shells under test start as a terminal starts them, whatever the
    test run's own signals: run in the background, the suite stored a
    Ctrl-C'd line as 0 (bash handed the ignored SIGINT to `sleep`, which
    ran to its end) and waited in vain for prompts after `pkill -INT`."""
    # positive control: what this process starts ignores the interrupts
    status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True)
    assert set(INTERRUPTS) <= _ignored_signals(status.stdout)
    line = "sleep 31.75"  # a duration no other test's sleep has
    sh = Shell(kind, install, user_home)
    status = clean(sh.run("grep ^SigIgn: /proc/self/status"))
    assert not set(INTERRUPTS) & _ignored_signals(status), status
    sh.proc.sendline(line)
    sh.wait_program(line)
    sh.proc.sendintr()
    sh.proc.expect(PROMPT)
    sh.exit()
    assert only(user_home, line).return_value == 130


# --------------------------------------------- shournal's own runtime files

@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_nested_shell_leaves_no_runtime_files_in_the_journal(kind, install, user_home):
    """A command line that runs a nested recorded shell: the outer command's
    written files contain nothing of shournal's runtime directory, nor of
    the command lines' starts on disk (hidden files recorded, so that the
    starts under ~/.local are not dropped as hidden anyway)."""
    write_config(user_home, "[write_events]\nexclude_hidden = false\n", install)
    sh = Shell(kind, install, user_home)
    rc = user_home / (".bashrc" if kind == "bash" else ".zshrc")
    nested = f"bash --noprofile --rcfile {rc} -i" if kind == "bash" else "zsh -i"
    sh.proc.sendline(nested)
    sh.proc.expect(PROMPT)
    sh.run("echo inner > inner_out")
    sh.proc.sendline("exit 0")
    sh.proc.expect(PROMPT)
    sh.run("true")
    sh.exit()
    rundir = os.fsencode(user_home / "run")
    starts = os.fsencode(spool_of(user_home) / "starts")
    outer = only(user_home, nested)
    assert [e.path for e in outer.writes if e.path.startswith(rundir)] == []
    # nor the starts the nested shell kept on disk for its lines
    assert [e.path for e in outer.writes if e.path.startswith(starts)] == []
    inner = only(user_home, "echo inner > inner_out")
    assert [os.path.basename(e.path) for e in inner.writes] == [b"inner_out"]
    for cmd in recorded(user_home):
        assert not [e.path for e in cmd.writes if e.path.startswith(rundir)], cmd.text


# ------------------------------------------------------- long command lines

@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_long_command_line_is_stored_whole(kind, install, user_home):
    """A 100 KB command line, pasted (bracketed paste, as a terminal sends
    it), is stored with its full text and its write."""
    value = "".join(f"{i:07d}," for i in range(100_000 // 8))
    line = f"v='{value}'; echo ${{#v}} > long_out"
    sh = Shell(kind, install, user_home)
    sh.proc.send("\x1b[200~" + line + "\x1b[201~")
    sh.proc.send("\r")
    sh.proc.expect(PROMPT, timeout=120)
    sh.exit()
    (cmd,) = [c for c in recorded(user_home) if c.text.startswith("v='")]
    assert len(cmd.text) == len(line)
    assert cmd.text == line
    assert [os.path.basename(e.path) for e in cmd.writes] == [b"long_out"]
    assert (user_home / "work" / "long_out").read_text() == f"{len(value)}\n"


# ------------------------------------------------- the rc file runs twice

@pytest.mark.parametrize("kind", ["bash", "zsh"])
def test_doctor_names_rc_lines_that_ran_twice(kind, install, user_home):
    """SHOURNAL_ENABLE restarts the shell: the rc lines above it ran twice,
    and `shournal doctor` in that shell says which, with the fix."""
    sh = Shell(kind, install, user_home, rc_extra="echo RC-$((40+2))-RAN")
    started = clean(sh.proc.before)
    assert started.count("RC-42-RAN") == 2, started
    out = clean(sh.run("shournal doctor", timeout=120))
    sh.exit()
    rc = user_home / (".bashrc" if kind == "bash" else ".zshrc")
    lines = rc.read_text().splitlines()
    enable_at = lines.index("SHOURNAL_ENABLE") + 1
    above = [ln for ln in lines[: enable_at - 1]
             if ln.strip() and not ln.startswith("#") and "shournal." not in ln]
    want = (f"FAIL rc file runs once: {len(above)} line(s) of {rc} above SHOURNAL_ENABLE "
            f"(line {enable_at}) ran twice")
    assert want in out, out
    assert f"fix: move the two shournal lines to the top of {rc}" in out


# ------------------------------------------- the shell's own child processes

def children(pid: int) -> dict[int, tuple[str, int]]:
    """pid -> (comm, exit signal) of each child of `pid` (proc(5): the
    field after the comm's ")" are state, ppid, ..., exit_signal 38th)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found[int(entry.name)] = (comm, int(fields[35]))
    return found


@pytest.mark.parametrize("kind", ["bash", "zsh"])
@pytest.mark.parametrize("listener", ["listener", "daemon"])
def test_shournal_processes_send_the_shell_no_sigchld(kind, listener, install, user_home):
    """The helper, listener and daemon starter are no children of the
    shell: the SIGCHLD of their exit would interrupt what zsh is doing (its
    handler has no SA_RESTART: a prompt it was printing was lost) and run
    the user's CHLD trap in bash for processes the user never started."""
    from fixtures_shell import wait_stored
    from test_daemon import daemon_env

    env = daemon_env(install) if listener == "daemon" else None
    sh = Shell(kind, install, user_home, extra_env=env)
    shell_pid = int(re.search(r"PID=(\d+)", clean(sh.run("echo PID=$$"))).group(1))
    for i in range(6):
        sh.run(f": line {i}")
    wait_stored(user_home)
    # what shournal keeps for the next line, and a job of the user's own
    sh.run("sleep 30 &")
    # the job is the shell's child from its fork on, but `sleep` only once
    # it has passed the exec trampoline (shournal-suid exec, comm "exe")
    wait_for(lambda: any(comm == "sleep" for comm, _ in children(shell_pid).values()),
             "the job to exec sleep")
    kids = children(shell_pid)
    assert any(comm == "sleep" and sig == signal.SIGCHLD for comm, sig in kids.values()), kids

    # (the prepared helper of the next line, a listener still storing, the
    # daemon's starter: none of them.  The library starts the next line's
    # helper once the prompt is drawn, through a clone of the shell without
    # an exit signal that it reaps at once: seen for a moment at most.)
    def only_the_job() -> bool:
        kids = children(shell_pid)
        assert all(sig == 0 for comm, sig in kids.values() if comm != "sleep"), kids
        return [k for k in kids.values() if k[0] != "sleep"] == []

    wait_for(only_the_job, "the user's job to be the shell's only child", 10)
    sh.run("kill %1")
    sh.exit()
