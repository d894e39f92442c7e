"""Unit tests of the apparatus recorder: the secret filter, the helper
options, the manifest's table and its migration."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from shournal.config import ApparatusConfig, Config, ConfigError, helper_options, parse_config
from shournal.journal import Journal
from shournal.record import CommandRecord
from shournal.redact import MARKER as REDACTED
from shournal.redact import is_secret_name as is_secret
from shournal.redact import redact_env
from shournal.store import Store
from shournal.store import models as m
from shournal.store.archive import decode_manifest, encode_manifest
from shournal.store.migrations import SCHEMA_VERSION

DEFAULT = ApparatusConfig().secret_env_names


@pytest.mark.parametrize(
    "name",
    ["GITHUB_TOKEN", "token", "MY_TOKEN_FILE", "AWS_SECRET_ACCESS_KEY", "client_secret",
     "PGPASSWORD", "db_password", "API_KEY", "ssh_key", "OPENAI_API_KEY"],
)
def test_secret_looking_names_are_redacted(name: str) -> None:
    env = {name: "s3cr3t", "HOME": "/home/u"}
    out, counts = redact_env(env, DEFAULT)
    assert out == {name: REDACTED, "HOME": "/home/u"} and counts == {"secret-name": 1}
    assert "s3cr3t" not in repr(out)


@pytest.mark.parametrize("name", ["PATH", "HOME", "KEYBOARD", "LANG", "MONKEY", "TOKENIZERS"])
def test_ordinary_names_are_kept(name: str) -> None:
    # TOKENIZERS matches *TOKEN*: patterns are globs, not words.
    assert is_secret(name, DEFAULT) == (name == "TOKENIZERS")


def test_secret_patterns_are_configurable() -> None:
    cfg = parse_config('[apparatus]\nsecret_env_names = ["MY_*", "*_PIN"]\n')
    assert cfg.apparatus.secret_env_names == ("MY_*", "*_PIN")
    env = {"MY_VAR": "a", "CARD_PIN": "1234", "GITHUB_TOKEN": "kept now"}
    assert redact_env(env, cfg.apparatus.secret_env_names)[0] == {
        "MY_VAR": REDACTED, "CARD_PIN": REDACTED, "GITHUB_TOKEN": "kept now"}
    with pytest.raises(ConfigError, match="secret_env_names"):
        parse_config("[apparatus]\nsecret_env_names = 3\n")


def test_apparatus_helper_options_ask_for_every_read_with_its_fd() -> None:
    cfg = parse_config('[apparatus]\nmax_file_size = "1MiB"\n')
    plain = helper_options(cfg)
    assert "--writable-reads" in plain and "--archive-ext" in plain
    opts = helper_options(cfg, apparatus=True)
    assert "--writable-reads" not in opts and "--no-read" not in opts
    assert "--archive-ext" not in opts and "--no-archive" not in opts
    assert opts[opts.index("--archive-max-size") + 1] == str(1024**2)
    off = parse_config("[read_events]\nenable = false\n[script_archive]\nenable = false\n")
    assert "--no-read" in helper_options(off)
    assert "--no-read" not in helper_options(off, apparatus=True)


def _record(apparatus: bytes | None) -> CommandRecord:
    return CommandRecord(text="python3 a.py", return_value=0, start_ns=10**18, end_ns=10**18 + 1,
                         working_dir="/w", username="u", hostname="h", session_uuid=None,
                         hash_chunk_size=256, hash_max_reads=3, apparatus=apparatus)


def test_manifest_is_stored_with_its_command_and_deleted_with_it(tmp_path: Path) -> None:
    from shournal.reproduce.experiment import load_manifest

    man = {"format": 1, "reads": [["/w/\udcff", 1, 2, 3, None, None, "too_large"]]}
    with Store(f"sqlite:///{tmp_path}/j.sqlite") as s:
        plain = s.add_command(_record(None))
        cid = s.add_command(_record(encode_manifest(man)))
        assert load_manifest(Journal(s), cid) == man == decode_manifest(encode_manifest(man))
        assert load_manifest(Journal(s), plain) is None
        with s.writing() as conn:
            conn.execute(text(f"DELETE FROM command WHERE id = {cid}"))
        with s.reading() as conn:
            assert conn.execute(text("SELECT count(*) FROM apparatus")).scalar_one() == 0


def test_schema_3_journal_gets_the_apparatus_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.sqlite"
    with Store(url) as s:
        cid = s.add_command(_record(None))
        with s.writing() as conn:
            conn.execute(text("DROP TABLE apparatus"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=3))
    with Store(url) as s:
        assert "apparatus" in inspect(s.engine).get_table_names()
        with s.reading() as conn:
            version = conn.execute(text("SELECT version FROM schema_version")).scalar_one()
            assert version == SCHEMA_VERSION
        s.add_command(_record(encode_manifest({"format": 1})))
        assert cid == 1


def test_default_config_has_the_apparatus_defaults() -> None:
    assert Config().apparatus == ApparatusConfig()
    assert ApparatusConfig().max_file_size == 64 * 1024**2


def test_schema_4_journal_gets_derived_from_and_keeps_its_manifests(tmp_path: Path) -> None:
    from dataclasses import replace

    from shournal.journal import Journal
    from shournal.reproduce.experiment import load_manifest

    url = f"sqlite:///{tmp_path}/j.sqlite"
    man = {"format": 1}
    with Store(url) as s:
        old = s.add_command(_record(encode_manifest(man)))
        with s.writing() as conn:
            conn.execute(text("ALTER TABLE apparatus DROP COLUMN derived_from"))
            conn.execute(m.SchemaVersion.__table__.update().values(version=4))
    with Store(url) as s:
        cols = {c["name"] for c in inspect(s.engine).get_columns("apparatus")}
        assert "derived_from" in cols
        assert load_manifest(Journal(s), old) == man
        new = s.add_command(replace(_record(encode_manifest(man)), derived_from=old))
        plain = s.add_command(_record(None))
        views = {v.id: v.derived_from for v in Journal(s).find()}
        assert views == {old: None, new: old, plain: None}


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({"A": "1", "SHOURNAL_APPARATUS_SHELL": "1", "B": "x=y"}, True),
        ({"SHOURNAL_APPARATUS_SHELL": "1"}, True),
        ({"A": "1", "XSHOURNAL_APPARATUS_SHELL": "1"}, False),
        ({"A": "SHOURNAL_APPARATUS_SHELL=1"}, False),
        ({"A": "1"}, False),
    ],
)
def test_a_forwarders_environment_is_parsed_only_when_it_switches_the_apparatus_on(
    env: dict[str, str], found: bool
) -> None:
    """The daemon reads the forwarder's /proc/<pid>/environ once per
    command line; it is parsed only when it holds the switch."""
    import subprocess
    import sys

    from shournal.capture.apparatus import SHELL_SWITCH_VAR, _environ_of

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # past its exec: /proc/<pid>/environ is its own
        got = _environ_of(proc.pid, SHELL_SWITCH_VAR)
        assert (got == env) if found else (got == {}), got
        assert _environ_of(proc.pid) == env
    finally:
        proc.communicate(b"")


def test_a_line_handed_over_by_the_helper_is_not_looked_at_for_the_apparatus() -> None:
    """The daemon learns from FORWARD (SHOURNAL_FORWARD_BY_HELPER) that the
    setup helper handed the line over itself, which the shell never lets
    it do for the apparatus: it then reads nothing of the forwarder (its
    /proc/<pid>/environ, a read per command line).  A real process whose
    environment has the switch: looked at, its line is the apparatus's."""
    import subprocess
    import sys

    from shournal.capture import apparatus
    from shournal.capture.collector import Collector

    cfg = parse_config("")
    env = {"PATH": "/usr/bin:/bin", apparatus.SHELL_SWITCH_VAR: "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"  # exec'd
        looked = apparatus.collector(cfg, 0, frozenset(), proc.pid, "/")
        not_looked = apparatus.collector(cfg, 0, frozenset(), proc.pid, "/", shell_switch=False)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert type(looked) is not Collector  # the positive control: the apparatus's
    assert type(not_looked) is Collector
