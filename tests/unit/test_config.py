"""The TOML configuration: defaults, validation and error positions."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from shournal import config as config_mod
from shournal.config import (
    DEFAULT_CONFIG_TEXT,
    ApparatusConfig,
    Config,
    ConfigError,
    HashConfig,
    IgnoreCommandsConfig,
    MountsConfig,
    ReadEventsConfig,
    RedactConfig,
    ScriptArchiveConfig,
    StoreConfig,
    WriteEventsConfig,
    load_config,
    parse_config,
    parse_size,
)

HOME = "/home/tester"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def parse(text: str) -> Config:
    return parse_config(text, "config.toml")


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    return info.value


SECTIONS = {
    "write_events": WriteEventsConfig,
    "read_events": ReadEventsConfig,
    "script_archive": ScriptArchiveConfig,
    "ignore_commands": IgnoreCommandsConfig,
    "mounts": MountsConfig,
    "hash": HashConfig,
    "store": StoreConfig,
    "apparatus": ApparatusConfig,
    "redact": RedactConfig,
}


# ---- defaults and the default file -----------------------------------------


def test_defaults() -> None:
    cfg = Config()
    assert cfg.write_events == WriteEventsConfig(("/",), (), True, 5000)
    assert cfg.read_events == ReadEventsConfig(True, True, (HOME,), (), True, 5000)
    assert cfg.script_archive == ScriptArchiveConfig(
        True, True, 500 * 1024, 3, ("/",), (), True,
        ("sh", "bash", "zsh", "py", "R", "r", "pl", "awk", "sed", "jl", "m", "ipynb",
         "smk", "nf", "yaml", "yml", "toml", "json", "ini", "cfg"),
        ("Makefile", "Snakefile"),
    )  # fmt: skip
    assert cfg.ignore_commands.commands == ()
    assert cfg.mounts.exclude_paths == ()
    assert cfg.hash == HashConfig(True, 256, 3)
    assert cfg.store.url == ""


def test_config_is_frozen() -> None:
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.hash.chunk_size = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        cfg.hash = HashConfig()  # type: ignore[misc]


def test_default_text_gives_defaults() -> None:
    cfg = parse(DEFAULT_CONFIG_TEXT)
    assert cfg == Config()
    assert tomllib.loads(DEFAULT_CONFIG_TEXT) == {name: {} for name in SECTIONS}


def _settings_by_section(text: str) -> dict[str, list[tuple[str, int]]]:
    result: dict[str, list[tuple[str, int]]] = {}
    section = ""
    for number, line in enumerate(text.splitlines()):
        if line.startswith("["):
            section = line.strip("[]")
            result[section] = []
        m = re.match(r"# (\w+) = ", line)
        if m:
            result[section].append((m.group(1), number))
    return result


def test_default_text_documents_every_key() -> None:
    lines = DEFAULT_CONFIG_TEXT.splitlines()
    settings = _settings_by_section(DEFAULT_CONFIG_TEXT)
    assert list(settings) == list(SECTIONS)
    for section, cls in SECTIONS.items():
        keys = [key for key, _ in settings[section]]
        assert keys == list(cls.__slots__), section
        for _, number in settings[section]:
            doc = lines[number - 1]
            assert doc.startswith("# ") and not re.match(r"# \w+ = ", doc), (section, doc)


def test_uncommented_default_text_gives_defaults() -> None:
    uncommented = re.sub(r"(?m)^# (\w+ = )", r"\1", DEFAULT_CONFIG_TEXT)
    assert uncommented != DEFAULT_CONFIG_TEXT
    data = tomllib.loads(uncommented)
    assert all(data[name] for name in SECTIONS)
    assert parse(uncommented) == Config()


# ---- load_config and the file on disk --------------------------------------


def test_first_use_creates_the_commented_file(tmp_path: Path) -> None:
    cfg = load_config()
    path = tmp_path / "xdg" / "shournal" / "config.toml"
    assert path.read_text() == DEFAULT_CONFIG_TEXT
    assert cfg == Config()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]
    again = load_config()
    assert again == cfg
    assert again.source == path


def test_explicit_path_and_create_false(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "my.toml"
    assert load_config(path, create=False) == Config()
    assert not path.exists()
    assert load_config(path) == Config()
    assert path.read_text() == DEFAULT_CONFIG_TEXT


def test_existing_file_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[hash]\nchunk_size = 512\n")
    config_mod._write_default(path)  # a racing creator must not clobber it
    assert load_config(path).hash.chunk_size == 512
    assert [p.name for p in tmp_path.iterdir()] == ["c.toml"]


def test_uncreatable_file_still_gives_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(config_mod, "_write_default", refuse)
    assert load_config(tmp_path / "config.toml") == Config()


def test_defaults_only_ignores_the_file(tmp_path: Path) -> None:
    path = tmp_path / "xdg" / "shournal" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[bogus]\n")
    with pytest.raises(ConfigError):
        load_config()
    assert load_config(path=None, create=False, defaults_only=True) == Config()


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "dir.toml"
    path.mkdir()
    with pytest.raises(ConfigError, match=r"dir\.toml: cannot read"):
        load_config(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"[hash]\n# caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}:2: invalid TOML: not UTF-8"


def test_error_names_the_full_path(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[hash]\nchunk_size = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}:2: [hash] chunk_size: must be between 8 and 40960, got 3"
    assert info.value.file == str(path)
    assert (info.value.line, info.value.section, info.value.key) == (2, "hash", "chunk_size")


def test_stdlib_only_and_no_toml_parser_for_an_untouched_file() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from shournal import config\n"
        "from shournal import hashing\nfrom shournal.capture import filters\n"
        "config.parse_config(config.DEFAULT_CONFIG_TEXT)\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'shournal', 'xxhash'}))\n"
        "print('tomllib' in sys.modules, 'typing' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "False False"


# ---- values -----------------------------------------------------------------


FULL = """\
[write_events]
include_paths = ["/srv", "~/work"]
exclude_paths = ["/srv/tmp"]
exclude_hidden = false
max_event_count = 0

[read_events]
enable = false
only_writable = false
include_paths = ["$HOME/projects"]
exclude_paths = ["${HOME}/projects/big"]
exclude_hidden = false
max_event_count = 10

[script_archive]
enable = false
only_writable = false
max_size = "2M"
max_count_of_files = 0
include_paths = ["/opt"]
exclude_paths = ["/opt/x"]
exclude_hidden = false
include_file_extensions = ["py", ".sh"]

[ignore_commands]
commands = ["ls", "git   status", "make*"]

[mounts]
exclude_paths = ["/mnt/nfs"]

[hash]
enable = false
chunk_size = 8
max_count_of_reads = 1

[store]
url = "postgresql://db/shournal"
"""


def test_every_key_set() -> None:
    cfg = parse(FULL)
    assert cfg.write_events == WriteEventsConfig(("/srv", f"{HOME}/work"), ("/srv/tmp",), False, 0)
    assert cfg.read_events == ReadEventsConfig(
        False, False, (f"{HOME}/projects",), (f"{HOME}/projects/big",), False, 10
    )
    assert cfg.script_archive == ScriptArchiveConfig(
        False, False, 2 * 1024**2, 0, ("/opt",), ("/opt/x",), False, ("py", "sh")
    )
    assert cfg.ignore_commands.commands == ("ls", "git status", "make*")
    assert cfg.mounts.exclude_paths == ("/mnt/nfs",)
    assert cfg.hash == HashConfig(False, 8, 1)
    assert cfg.store.url == "postgresql://db/shournal"
    assert cfg.source == Path("config.toml")


def test_partial_section_keeps_other_defaults() -> None:
    cfg = parse("[hash]\nchunk_size = 40960\n")
    assert cfg.hash == HashConfig(True, 40960, 3)
    assert cfg.write_events == WriteEventsConfig()


def test_inline_and_dotted_tables() -> None:
    assert parse("hash = { chunk_size = 512 }\n").hash.chunk_size == 512
    assert parse("hash.max_count_of_reads = 7\n").hash.max_count_of_reads == 7


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("$HOME", HOME),
        ("$HOME/", HOME),
        ("${HOME}/a", f"{HOME}/a"),
        ("~", HOME),
        ("~/a/b", f"{HOME}/a/b"),
        ("/a//b/../c/", "/a/c"),
        ("//srv", "/srv"),
        ("///srv/./x", "/srv/x"),
        ("/", "/"),
        ("  /padded  ", "/padded"),
    ],
)
def test_path_expansion(raw: str, expected: str) -> None:
    assert parse(f'[mounts]\nexclude_paths = ["{raw}"]\n').mounts.exclude_paths == (expected,)


def test_home_prefix_needs_a_component_boundary() -> None:
    err = error('[mounts]\nexclude_paths = ["$HOMEx"]\n')
    assert "only $HOME and ~ are expanded" in str(err)


def test_home_variable_is_used_for_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/var/h//")
    assert Config().read_events.include_paths == ("/var/h",)


@pytest.mark.parametrize("raw", ["relative/x", "$CWD/x", "~other/x", ""])
def test_paths_must_be_absolute(raw: str) -> None:
    err = error(f'[write_events]\nexclude_paths = [\n  "/ok",\n  "{raw}",\n]\n')
    # the line of the offending element, not of the key
    assert str(err).startswith("config.toml:4: [write_events] exclude_paths: path must be absolute")


def test_nested_include_paths_are_dropped() -> None:
    cfg = parse(
        '[write_events]\ninclude_paths = ["/a/b", "/a", "/a/", "/c/d", "/ab", "/a/b/c"]\n'
        'exclude_paths = ["/a/x/y", "/a/x", "/a/.h/z"]\n'
    )
    assert cfg.write_events.include_paths == ("/a", "/c/d", "/ab")
    assert cfg.write_events.exclude_paths == ("/a/x", "/a/.h/z")


def test_root_swallows_other_include_paths() -> None:
    cfg = parse('[script_archive]\ninclude_paths = ["/usr", "/"]\n')
    assert cfg.script_archive.include_paths == ("/",)


def test_hidden_include_below_a_visible_one_is_kept() -> None:
    # listing it is what exempts it from exclude_hidden
    cfg = parse(
        '[read_events]\ninclude_paths = ["~", "~/.config", "~/.config/x", "~/.config/.y", '
        '"~/a/.b", "~/a"]\n'
    )
    assert cfg.read_events.include_paths == (HOME, f"{HOME}/.config", f"{HOME}/a/.b")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("500KiB", 512000),
        ("500kib", 512000),
        ("1k", 1024),
        ("1KB", 1024),
        ("2M", 2 * 1024**2),
        ("2mb", 2 * 1024**2),
        ("2MiB", 2 * 1024**2),
        ("1G", 1024**3),
        ("1gb", 1024**3),
        ("1GiB", 1024**3),
        ("3t", 3 * 1024**4),
        ("3TB", 3 * 1024**4),
        ("3tib", 3 * 1024**4),
        ("7B", 7),
        (" 10 KiB ", 10240),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "KiB", "1.5M", "-1", "10 XB", "1KiBs", "1 2"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_max_size_forms() -> None:
    assert parse("[script_archive]\nmax_size = 100\n").script_archive.max_size == 100
    assert parse('[script_archive]\nmax_size = "1M"\n').script_archive.max_size == 1024**2
    err = error('[script_archive]\nmax_size = "lots"\n')
    assert str(err).startswith("config.toml:2: [script_archive] max_size: invalid size 'lots'")
    err = error("[script_archive]\nmax_size = -1\n")
    assert str(err) == "config.toml:2: [script_archive] max_size: must be >= 0, got -1"
    err = error("[script_archive]\nmax_size = 1.5\n")
    assert "got float 1.5" in str(err)


# ---- errors -----------------------------------------------------------------


def test_range_error_format() -> None:
    text = "\n" * 10 + "[hash]\nchunk_size = 3\n"
    err = error(text)
    assert str(err) == "config.toml:12: [hash] chunk_size: must be between 8 and 40960, got 3"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hash]\nchunk_size = 40961\n", "must be between 8 and 40960, got 40961"),
        ("[hash]\nmax_count_of_reads = 0\n", "must be >= 1, got 0"),
        ("[write_events]\nmax_event_count = -1\n", "must be >= 0, got -1"),
        ("[hash]\nchunk_size = true\n", "expected an integer, got boolean true"),
        ('[hash]\nchunk_size = "256"\n', "expected an integer, got string '256'"),
        ("[hash]\nenable = 1\n", "expected true or false, got integer 1"),
        ('[hash]\nenable = "yes"\n', "expected true or false, got string 'yes'"),
        ("[store]\nurl = 5\n", "expected a string, got integer 5"),
        ('[write_events]\ninclude_paths = "/"\n', "expected an array of strings, got string '/'"),
        ("[write_events]\ninclude_paths = [1]\n", "expected an array of strings, found integer 1"),
        ("[mounts]\nexclude_paths = {}\n", "expected an array of strings, got a table"),
    ],
)
def test_type_and_range_errors(text: str, message: str) -> None:
    err = error(text)
    assert str(err).startswith("config.toml:2: [")
    assert str(err).endswith(message)


def test_unknown_key() -> None:
    err = error("[write_events]\n# comment\n\n\n\n\nfoo = 1\n")
    assert str(err) == "config.toml:7: unknown key 'foo' in [write_events]"
    assert (err.section, err.key, err.line) == ("write_events", "foo", 7)


def test_unknown_key_suggests_a_name() -> None:
    err = error("[hash]\nchunksize = 512\n")
    assert (
        str(err) == "config.toml:2: unknown key 'chunksize' in [hash] (did you mean 'chunk_size'?)"
    )


def test_unknown_section() -> None:
    err = error("[hash]\n\n[\"File write-events\"]\ninclude_paths = ['/']\n")
    assert str(err).startswith("config.toml:3: unknown section [File write-events]")
    err = error('["hsah"]\n')
    assert str(err) == "config.toml:1: unknown section [hsah] (did you mean 'hash'?)"


def test_top_level_key() -> None:
    err = error("# x\nchunk_size = 3\n")
    assert str(err).startswith("config.toml:2: unknown top-level key 'chunk_size'")


def test_section_must_be_a_table() -> None:
    err = error("store = 3\n")
    assert str(err) == "config.toml:1: [store] must be a table, got integer 3"
    err = error("[[store]]\nurl = ''\n")
    assert str(err) == "config.toml:1: [store] must be a table, got an array"


def test_key_line_found_in_the_right_section() -> None:
    text = "[read_events]\nenable = true\n\n[hash]\n  enable = 3\n"
    assert str(error(text)).startswith("config.toml:5: [hash] enable:")
    text = '[ "hash" ]\n"chunk_size" = 1\n'
    assert str(error(text)).startswith("config.toml:2: [hash] chunk_size:")
    text = "[store]\nurl = ''\n\nhash.chunk_size = 1\n"  # dotted key inside [store]
    assert str(error(text)).startswith("config.toml:4: unknown key 'hash' in [store]")
    text = "# top\nhash.chunk_size = 1\n"
    assert str(error(text)).startswith("config.toml:2: [hash] chunk_size:")
    text = "hash = { chunk_size = 1 }\n"  # no key line: the table's line
    assert str(error(text)).startswith("config.toml:1: [hash] chunk_size:")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[hash]\nchunk_size = \n", 2),
        ("[hash]\n[hash]\n", 2),
        ("[hash]\nenable = true\nenable = false\n", 3),
        ("[write_events]\ninclude_paths = ['/',\n", 2),
        ("[store]\nurl = 'x\n", 2),
        ("[hash\n", 1),
    ],
)
def test_syntax_errors(text: str, line: int) -> None:
    err = error(text)
    assert str(err).startswith(f"config.toml:{line}: invalid TOML: ")
    assert err.line == line


def test_duplicate_header_is_not_mistaken_for_untouched() -> None:
    with pytest.raises(ConfigError, match="invalid TOML"):
        parse("# c\n[hash]\n# d\n[hash]\n")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ls", "ls"),
        ("  git  status  -s ", "git status -s"),
        ("make*", "make*"),
        ("/bin/x*", "/bin/x*"),
    ],
)
def test_ignore_commands_normalised(raw: str, expected: str) -> None:
    cfg = parse(f"[ignore_commands]\ncommands = ['{raw}']\n")
    assert cfg.ignore_commands.commands == (expected,)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "names no command"),
        ("   ", "names no command"),
        ("*", "names no command"),
        ("/*", "names no command"),
        ("git status*", "takes no arguments"),
        ("git *", "takes no arguments"),
        ("g*t", "allowed only as"),
        ("ls *.txt x", "allowed only as"),
    ],
)
def test_ignore_commands_invalid(raw: str, message: str) -> None:
    err = error(f"[ignore_commands]\ncommands = [\n 'ok',\n '{raw}',\n]\n")
    assert str(err).startswith("config.toml:4: [ignore_commands] commands: invalid command")
    assert message in str(err)


@pytest.mark.parametrize("raw", ["", ".", "a/b", "tar.gz"])
def test_extensions_invalid(raw: str) -> None:
    err = error(f"[script_archive]\ninclude_file_extensions = ['{raw}']\n")
    assert "invalid file extension" in str(err)


def test_empty_extension_list_is_allowed() -> None:
    cfg = parse("[script_archive]\ninclude_file_extensions = []\n")
    assert cfg.script_archive.include_file_extensions == ()


def test_helper_options_follow_the_config():
    from shournal.config import (
        Config,
        HashConfig,
        MountsConfig,
        ReadEventsConfig,
        ScriptArchiveConfig,
        helper_options,
    )

    exts = [a for e in Config().script_archive.include_file_extensions
            for a in ("--archive-ext", e)]  # fmt: skip
    defaults = ["--hash", "256:3", "--archive-max-size", "512000", *exts,
                "--archive-name", "Makefile", "--archive-name", "Snakefile"]
    assert helper_options(Config()) == ["--writable-reads", *defaults]
    off = Config(read_events=ReadEventsConfig(enable=False),
                 script_archive=ScriptArchiveConfig(enable=False))
    assert helper_options(off) == ["--no-read", "--hash", "256:3", "--no-archive"]
    any_read = Config(read_events=ReadEventsConfig(only_writable=False))
    assert helper_options(any_read) == defaults
    any_archive = Config(script_archive=ScriptArchiveConfig(only_writable=False))
    assert helper_options(any_archive) == defaults
    mounts = Config(mounts=MountsConfig(exclude_paths=("/mnt/a", "/mnt/b")))
    assert helper_options(mounts) == ["--writable-reads", "--exclude-mount", "/mnt/a",
                                      "--exclude-mount", "/mnt/b", *defaults]
    # the holder hashes with the config's settings, or not at all
    hashing = Config(hash=HashConfig(chunk_size=4096, max_count_of_reads=2**40))
    assert helper_options(hashing)[1:3] == ["--hash", f"4096:{2**31 - 1}"]
    assert "--no-hash" in helper_options(Config(hash=HashConfig(enable=False)))
    # extensions the helper cannot take: it pre-filters by size only
    odd = Config(script_archive=ScriptArchiveConfig(include_file_extensions=("x" * 33,)))
    assert helper_options(odd)[-2:] == ["--archive-max-size", "512000"]
    many = Config(script_archive=ScriptArchiveConfig(
        include_file_extensions=tuple(f"e{i}" for i in range(33))))
    assert "--archive-ext" not in helper_options(many)
    anyext = Config(script_archive=ScriptArchiveConfig(include_file_extensions=()))
    assert helper_options(anyext)[-2:] == ["--archive-max-size", "512000"]
    # names only beside extensions; they count against the same limit
    just_sh = Config(script_archive=ScriptArchiveConfig(include_file_extensions=("sh",),
                                                        include_file_names=("GNUmakefile",)))
    assert helper_options(just_sh)[-4:] == ["--archive-ext", "sh", "--archive-name",
                                            "GNUmakefile"]
    full = Config(script_archive=ScriptArchiveConfig(
        include_file_extensions=tuple(f"e{i}" for i in range(31)),
        include_file_names=("A", "B")))
    assert "--archive-name" not in helper_options(full)


# ---- [redact] ---------------------------------------------------------------


def test_redact_patterns_are_read_in_order() -> None:
    cfg = parse('[redact]\npatterns = [\n  {name = "acme", regex = "acme_[0-9]+"},\n'
                '  {name = "t.k", regex = "tk=(?P<secret>\\\\S+)"},\n]\n')
    assert cfg.redact == RedactConfig((("acme", "acme_[0-9]+"), ("t.k", r"tk=(?P<secret>\S+)")))


@pytest.mark.parametrize(("body", "needle", "line"), [
    ('patterns = [{name = "a", regex = "acme_("}]', "pattern 'a': invalid regex", 2),
    ('patterns = [\n  {name = "ok", regex = "x"},\n  {name = "b", regex = "a*"},\n]',
     "matches the empty text", 4),
    ('patterns = [{name = "Bad Name", regex = "x"}]', "invalid pattern name", 2),
    ('patterns = [{name = "a", regex = "x"}, {name = "a", regex = "y"}]', "given twice", 2),
    ('patterns = [{name = "a"}]', 'expected {name = "...", regex = "..."}', 2),
    ('patterns = ["acme_.*"]', "expected {name", 2),
    ('patterns = "acme"', "expected an array", 2),
    ('patterns = [{name = "a", regex = 5}]', "must be strings", 2),
])  # fmt: skip
def test_bad_redact_patterns_are_one_line_errors(body: str, needle: str, line: int) -> None:
    err = error(f"[redact]\n{body}\n")
    assert needle in str(err), str(err)
    assert str(err).startswith(f"config.toml:{line}: [redact] patterns: "), str(err)


def test_spool_dir_is_an_absolute_path_or_empty() -> None:
    assert parse("[store]\nspool_dir = '/nfs/me/spool/'\n").store.spool_dir == "/nfs/me/spool"
    assert parse("[store]\nspool_dir = ''\n").store.spool_dir == ""
    assert parse("[store]\nspool_dir = '~/s'\n").store.spool_dir.endswith("/s")
    assert "absolute path" in str(error("[store]\nspool_dir = 'relative/spool'\n"))


def test_a_section_copied_with_a_change_is_a_new_section() -> None:
    """What `shournal run --archive-outputs` does to [apparatus]
    (dataclasses.replace's behaviour, on the plain sections)."""
    from shournal.config import ApparatusConfig

    cfg = ApparatusConfig(max_file_size=10)
    copy = cfg._replace(archive_outputs=True)
    assert copy == ApparatusConfig(max_file_size=10, archive_outputs=True)
    assert cfg.archive_outputs is False
    with pytest.raises(TypeError, match="no field 'archive'"):
        cfg._replace(archive=True)
