"""Per-event rules: paths, hidden files, permissions, archival, ignored commands."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shournal.capture.filters import (
    BUILTIN_IGNORED_COMMANDS,
    IgnoredCommands,
    PathRule,
    ScriptArchiveRule,
    may_read,
    may_write,
)
from shournal.config import (
    Config,
    IgnoreCommandsConfig,
    ReadEventsConfig,
    ScriptArchiveConfig,
    WriteEventsConfig,
    parse_config,
)

UID, OTHER_UID = 1000, 1001
GIDS = frozenset({100, 1000})
OTHER_GID = 555


def fake_stat(mode: int, uid: int = UID, gid: int = OTHER_GID, size: int = 0) -> os.stat_result:
    # (mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime)
    return os.stat_result((0o100000 | mode, 1, 1, 1, uid, gid, size, 0, 0, 0))


# ---- PathRule -----------------------------------------------------------------


def test_component_boundaries() -> None:
    rule = PathRule(["/home/a"], exclude_hidden=False)
    assert rule.match(b"/home/a")
    assert rule.match(b"/home/a/x")
    assert rule.match(b"/home/a/x/y")
    assert not rule.match(b"/home/ab")
    assert not rule.match(b"/home/ab/x")
    assert not rule.match(b"/home")
    assert not rule.match(b"/home/")
    assert not rule.match(b"/")


def test_root_includes_everything() -> None:
    rule = PathRule(["/"], exclude_hidden=False)
    for path in (b"/", b"/x", b"/a/b/c", b"/.hidden/x"):
        assert rule.match(path)


def test_excludes_on_boundaries() -> None:
    rule = PathRule(["/"], ["/home/a/tmp", "/proc"])
    assert not rule.match(b"/home/a/tmp")
    assert not rule.match(b"/home/a/tmp/x")
    assert rule.match(b"/home/a/tmpx")
    assert rule.match(b"/home/a/tm")
    assert not rule.match(b"/proc/1/status")
    assert rule.match(b"/processes")


def test_exclude_root_excludes_everything() -> None:
    rule = PathRule(["/home"], ["/"])
    assert not rule.match(b"/home/x")


def test_empty_include_matches_nothing() -> None:
    assert not PathRule([]).match(b"/x")


def test_several_includes() -> None:
    rule = PathRule(["/srv", "/home/a"], exclude_hidden=False)
    assert rule.match(b"/srv/x")
    assert rule.match(b"/home/a/y")
    assert not rule.match(b"/home/b/y")


def test_trailing_slashes_in_rules_are_tolerated() -> None:
    rule = PathRule(["/home/a/"], ["/home/a/tmp//"])
    assert rule.match(b"/home/a/x")
    assert not rule.match(b"/home/a/tmp/x")
    assert not rule.match(b"/home/ab")


def test_hidden_paths_are_excluded() -> None:
    rule = PathRule(["/home/a"])
    assert not rule.match(b"/home/a/.bashrc")
    assert not rule.match(b"/home/a/.cache/x")
    assert not rule.match(b"/home/a/x/.git/HEAD")
    assert rule.match(b"/home/a/x.y/z")
    assert rule.match(b"/home/a/x/y.")
    assert PathRule(["/home/a"], exclude_hidden=False).match(b"/home/a/.bashrc")


def test_hidden_include_path_is_exempt() -> None:
    rule = PathRule(["/home/a", "/home/a/.config"])
    assert rule.match(b"/home/a/.config")
    assert rule.match(b"/home/a/.config/app/rc")
    # everything below the listed hidden path, as in the original
    assert rule.match(b"/home/a/.config/.git/x")
    assert not rule.match(b"/home/a/.configx/rc")
    assert not rule.match(b"/home/a/.cache/x")
    assert rule.match(b"/home/a/visible")


def test_hidden_include_below_root() -> None:
    rule = PathRule(["/", "/home/a/.local/bin"])
    assert rule.match(b"/home/a/.local/bin/tool")
    assert not rule.match(b"/home/a/.local/share/x")
    assert rule.match(b"/usr/bin/ls")


def test_hidden_include_path_itself_under_a_hidden_parent() -> None:
    rule = PathRule(["/data/.store"])
    assert rule.match(b"/data/.store/obj")
    assert not rule.match(b"/data/other")


def test_exclude_wins_over_hidden_exemption() -> None:
    rule = PathRule(["/home/a", "/home/a/.config"], ["/home/a/.config/secret"])
    assert rule.match(b"/home/a/.config/ok")
    assert not rule.match(b"/home/a/.config/secret/key")


def test_non_utf8_paths() -> None:
    raw = b"/home/\xff\xfe"
    rule = PathRule([os.fsdecode(raw)], [os.fsdecode(raw + b"/ex\x80")])
    assert rule.match(raw + b"/file\xc3")
    assert not rule.match(b"/home/\xff/file")
    assert not rule.match(raw + b"/ex\x80/f")
    assert rule.match(raw + b"/ex\x81/f")
    assert PathRule([raw]).match(raw + b"/x")
    assert PathRule(["/"]).match(b"/\x80\x81/\xff")
    assert not PathRule(["/"]).match(b"/\x80/.\xff")


def test_from_config_sections() -> None:
    cfg = parse_config(
        '[write_events]\ninclude_paths = ["/w"]\nexclude_paths = ["/w/x"]\n'
        '[read_events]\ninclude_paths = ["/r", "/r/.k"]\nexclude_hidden = true\n'
    )
    write = PathRule.from_config(cfg.write_events)
    assert write.match(b"/w/a") and not write.match(b"/w/x/a") and not write.match(b"/r/a")
    read = PathRule.from_config(cfg.read_events)
    assert read.match(b"/r/.k/a") and not read.match(b"/r/.j/a")
    assert PathRule.from_config(WriteEventsConfig()).match(b"/anything")
    home = os.fsencode(ReadEventsConfig().include_paths[0])
    assert PathRule.from_config(ReadEventsConfig()).match(home + b"/doc")


components = st.sampled_from(["a", "ab", "b", ".h", ".hx", "\udcff"])
paths = st.lists(components, min_size=0, max_size=4).map(lambda c: "/" + "/".join(c))


def _under(path: str, parent: str) -> bool:
    return parent == "/" or path == parent or path.startswith(parent + "/")


@settings(max_examples=300, deadline=None)
@given(
    include=st.lists(paths, max_size=3),
    exclude=st.lists(paths, max_size=2),
    hidden=st.booleans(),
    path=paths,
)
def test_matches_the_plain_definition(
    include: list[str], exclude: list[str], hidden: bool, path: str
) -> None:
    expected = (
        any(_under(path, p) for p in include)
        and not any(_under(path, p) for p in exclude)
        and not (hidden and "/." in path and not any(_under(path, p) for p in include if "/." in p))
    )
    assert PathRule(include, exclude, hidden).match(os.fsencode(path)) == expected


# ---- permissions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "uid", "gid", "writable"),
    [
        (0o200, UID, OTHER_GID, True),  # owner may write
        (0o200, OTHER_UID, OTHER_GID, False),  # owner bit, but not ours
        (0o020, OTHER_UID, 100, True),  # group bit, our group
        (0o020, OTHER_UID, OTHER_GID, False),  # group bit, foreign group
        (0o020, UID, OTHER_GID, False),  # owning alone grants nothing
        (0o002, OTHER_UID, OTHER_GID, True),  # anyone
        (0o000, UID, 100, False),
        (0o575, UID, 100, True),  # other-write counts even without owner-write
        (0o755, OTHER_UID, 1000, False),  # group may only read
        (0o444, UID, 100, False),
        (0o777, OTHER_UID, OTHER_GID, True),
    ],
)
def test_may_write(mode: int, uid: int, gid: int, writable: bool) -> None:
    assert may_write(fake_stat(mode, uid, gid), UID, GIDS) is writable


@pytest.mark.parametrize(
    ("mode", "uid", "gid", "readable"),
    [
        (0o400, UID, OTHER_GID, True),
        (0o400, OTHER_UID, OTHER_GID, False),
        (0o040, OTHER_UID, 1000, True),
        (0o040, OTHER_UID, OTHER_GID, False),
        (0o004, OTHER_UID, OTHER_GID, True),
        (0o000, UID, 100, False),
        (0o200, UID, 100, False),  # write-only
        (0o640, OTHER_UID, OTHER_GID, False),
        (0o640, OTHER_UID, 100, True),
    ],
)
def test_may_read(mode: int, uid: int, gid: int, readable: bool) -> None:
    assert may_read(fake_stat(mode, uid, gid), UID, GIDS) is readable


def test_permission_bits_exhaustively() -> None:
    for mode in range(0o1000):
        for uid in (UID, OTHER_UID):
            for gid in (100, OTHER_GID):
                st_ = fake_stat(mode, uid, gid)
                owner, group = uid == UID, gid in GIDS
                w = bool(mode & 0o200 and owner or mode & 0o002 or mode & 0o020 and group)
                r = bool(mode & 0o400 and owner or mode & 0o004 or mode & 0o040 and group)
                assert may_write(st_, UID, GIDS) is w, oct(mode)
                assert may_read(st_, UID, GIDS) is r, oct(mode)


def test_special_bits_do_not_matter() -> None:
    for extra in (0o4000, 0o2000, 0o1000):
        assert may_write(fake_stat(0o200 | extra), UID, GIDS)
        assert not may_read(fake_stat(0o200 | extra), UID, GIDS)


def test_real_stat_result(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o600)
    st_ = os.stat(path)
    assert may_write(st_, st_.st_uid, frozenset())
    assert may_read(st_, st_.st_uid, frozenset())
    assert not may_write(st_, st_.st_uid + 1, frozenset({st_.st_gid}))


# ---- ScriptArchiveRule --------------------------------------------------------


def test_archive_extension_is_after_the_last_dot() -> None:
    rule = ScriptArchiveRule(exclude_hidden=False)
    assert rule.match(b"/x/run.sh", 10)
    assert rule.match(b"/x/a.tar.sh", 10)
    assert rule.match(b"/x/.sh", 10)  # basename ".sh": extension "sh"
    assert not rule.match(b"/x/run.SH", 10)  # case-sensitive
    assert not rule.match(b"/x/run.sh.bak", 10)
    assert not rule.match(b"/x/runsh", 10)
    assert not rule.match(b"/x/sh", 10)
    assert not rule.match(b"/x/run.bash", 10)
    assert not rule.match(b"/x.sh/run", 10)
    assert not rule.match(b"/x/run.zsh", 10)
    assert rule.match(b"/x/\xff\xfe.sh", 10)


def test_archive_several_extensions_and_none() -> None:
    rule = ScriptArchiveRule(extensions=["sh", "py"])
    assert rule.match(b"/a.py", 1) and rule.match(b"/a.sh", 1) and not rule.match(b"/a.pyc", 1)
    anything = ScriptArchiveRule(extensions=())
    assert anything.match(b"/bin/tool", 1)
    assert anything.match(b"/x/no_extension.", 1)


def test_archive_whole_names() -> None:
    rule = ScriptArchiveRule(extensions=["py"], names=["Makefile", "Snakefile"])
    assert rule.match(b"/w/Makefile", 1) and rule.match(b"/w/Snakefile", 1)
    assert rule.match(b"/w/a.py", 1)
    assert not rule.match(b"/w/GNUMakefile", 1)  # the whole basename only
    assert not rule.match(b"/w/Makefile.bak", 1) and not rule.match(b"/w/makefile", 1)
    with pytest.raises(ValueError):
        ScriptArchiveRule(names=["a/Makefile"])


@pytest.mark.parametrize("ext", ["", "a/b", ".sh", "tar.gz"])
def test_archive_rejects_bad_extensions(ext: str) -> None:
    with pytest.raises(ValueError):
        ScriptArchiveRule(extensions=[ext])


def test_archive_size_limit_is_inclusive() -> None:
    rule = ScriptArchiveRule(max_size=100)
    assert rule.match(b"/a.sh", 0)
    assert rule.match(b"/a.sh", 100)
    assert not rule.match(b"/a.sh", 101)


def test_archive_paths_and_hidden() -> None:
    rule = ScriptArchiveRule(include=["/home/a"], exclude=["/home/a/vendor"])
    assert rule.match(b"/home/a/s.sh", 1)
    assert not rule.match(b"/home/ab/s.sh", 1)
    assert not rule.match(b"/home/a/vendor/s.sh", 1)
    assert not rule.match(b"/home/a/.hidden/s.sh", 1)
    assert ScriptArchiveRule(exclude_hidden=False).match(b"/home/a/.hidden/s.sh", 1)


def test_archive_from_config() -> None:
    rule = ScriptArchiveRule.from_config(Config().script_archive)
    assert (rule.enable, rule.only_writable, rule.max_size, rule.max_count_of_files) == (
        True,
        True,
        500 * 1024,
        3,
    )
    assert rule.match(b"/srv/deploy.sh", 500 * 1024)
    assert not rule.match(b"/srv/deploy.sh", 500 * 1024 + 1)
    section = ScriptArchiveConfig(
        enable=False,
        only_writable=False,
        max_size=5,
        max_count_of_files=1,
        include_paths=("/p",),
        exclude_paths=(),
        exclude_hidden=True,
        include_file_extensions=("py",),
    )
    rule = ScriptArchiveRule.from_config(section)
    assert (rule.enable, rule.only_writable, rule.max_count_of_files) == (False, False, 1)
    assert rule.match(b"/p/a.py", 5) and not rule.match(b"/q/a.py", 5)
    assert not rule.match(b"/p/a.sh", 5)


# ---- IgnoredCommands ----------------------------------------------------------


def test_exact_command_lines() -> None:
    ignored = IgnoredCommands(["ls", "git status"], builtins=False)
    assert ignored.matches(["ls"])
    assert ignored.matches(["/bin/ls"])
    assert not ignored.matches(["ls", "-l"])
    assert ignored.matches(["git", "status"])
    assert ignored.matches(["/usr/bin/git", "status"])
    assert not ignored.matches(["git"])
    assert not ignored.matches(["git", "status", "-s"])
    assert not ignored.matches(["git", "log"])
    assert not ignored.matches(["lsblk"])


def test_wildcard_commands() -> None:
    ignored = IgnoredCommands(["make*", "/opt/bin/tool*"], builtins=False)
    assert ignored.matches(["make"])
    assert ignored.matches(["make", "-j8", "all"])
    assert ignored.matches(["/usr/bin/make", "x"])
    assert ignored.matches(["tool", "y"])
    assert not ignored.matches(["makex"])
    assert not ignored.matches(["cmake", "."])


def test_builtins() -> None:
    ignored = IgnoredCommands([])
    for entry in BUILTIN_IGNORED_COMMANDS:
        assert ignored.matches([entry.rstrip("*"), "--anything"])
    assert not IgnoredCommands([], builtins=False).matches(["mount", "-a"])
    assert not ignored.matches(["ls"])


def test_empty_command_line() -> None:
    assert not IgnoredCommands(["ls"]).matches([])
    assert not IgnoredCommands(["ls"]).matches_line("  ")


@pytest.mark.parametrize(
    "line",
    ["shournal version", "  shournal query --wfile 'a;b|c'", "/usr/bin/shournal x # note",
     "mount -a", "shournal-run x", "make -j4 all", "git status"],
)
def test_a_line_that_is_one_ignored_command(line: str) -> None:
    assert IgnoredCommands(["make*", "git status"]).matches_line(line)


@pytest.mark.parametrize(
    "line",
    ["shournal version; python3 analyze.py > results/hidden.txt",
     "shournal version && make", "shournal query > out.txt", "shournal query 2>err",
     "shournal query | tee out", "shournal x &", "shournal $(cat args)", "shournal `cat args`",
     "shournal a\nrm f", "(shournal x)", "shournal 'unbalanced", "make; ./deploy",
     "git status; git push", "FOO=1 shournal x", "shournalx", "ls"],
)
def test_a_line_that_runs_more_is_never_ignored(line: str) -> None:
    assert not IgnoredCommands(["make*", "git status"]).matches_line(line)


@pytest.mark.parametrize("entry", ["", "  ", "*", "/*", "git status*", "ls *"])
def test_invalid_entries(entry: str) -> None:
    with pytest.raises(ValueError):
        IgnoredCommands([entry])


def test_everything_the_config_accepts_is_accepted() -> None:
    cfg = parse_config(
        "[ignore_commands]\ncommands = ['ls', 'a  b  c', 'x*', '/usr/bin/y*', 'z -q']\n"
    )
    ignored = IgnoredCommands.from_config(cfg.ignore_commands)
    assert ignored.matches(["a", "b", "c"])
    assert ignored.matches(["y", "1"])
    assert ignored.matches(["z", "-q"])
    assert ignored.matches(["shournal", "--query"])
    assert not IgnoredCommands.from_config(IgnoreCommandsConfig(), builtins=False).matches(
        ["shournal"]
    )


def test_every_builtin_rule_is_documented() -> None:
    from shournal._default_config import DEFAULT_CONFIG_TEXT

    manual = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for entry in BUILTIN_IGNORED_COMMANDS:
        assert f'"{entry}"' in DEFAULT_CONFIG_TEXT and f"`{entry}`" in manual, entry
