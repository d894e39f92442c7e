"""shournal.confined: recorded paths checked, and nothing written, read or
removed outside the directory, whatever symlinks are planted in it (each
attack with a positive control); the replay plan writes through it."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from shournal.confined import (
    Confined,
    ConfinedError,
    Exists,
    UnsafePath,
    mirror,
    recorded_path,
    remove_tree,
)
from shournal.hashing import content_digest
from shournal.reproduce.experiment import Experiment
from shournal.reproduce.replay import ReplayError, plan
from shournal.store.archive import Archive


@pytest.mark.parametrize("path", ["/", "/a", "/a/b.c", "/a/..b/c..", "/a/.hidden", b"/x/y"])
def test_normalised_absolute_paths_are_accepted(path: str | bytes) -> None:
    assert recorded_path(path) == os.fsdecode(path)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "is not absolute"),
        ("a/b", "is not absolute"),
        ("/a/../b", "contains '..'"),
        ("/..", "contains '..'"),
        ("/a/./b", "contains '.'"),
        ("/a//b", "contains an empty component"),
        ("/a/", "contains an empty component"),
        ("/a\0b", "contains a NUL byte"),
        (b"/a/\0", "contains a NUL byte"),
    ],
)
def test_unnormalised_paths_are_refused_with_the_reason(path: str | bytes, why: str) -> None:
    with pytest.raises(UnsafePath) as info:
        recorded_path(path)
    assert str(info.value) == why


def test_mirror_maps_a_recorded_path_below_the_directory() -> None:
    assert mirror("/a/b") == "a/b" and mirror("/") == ""
    with pytest.raises(UnsafePath):
        mirror("/../../etc/passwd")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Confined, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    conf = Confined(tmp_path / "out", create=True)
    yield conf, outside
    conf.close()


def test_relative_paths_that_climb_are_refused(setup) -> None:
    conf, outside = setup
    for rel in ("../outside/victim", "a/../../outside/victim", "/abs", "a//b", "a/./b"):
        with pytest.raises(UnsafePath):
            conf.write(rel, b"x")
    assert (outside / "victim").read_bytes() == b"precious"
    conf.write("a/b/c", b"legit")  # positive control
    assert (conf.root / "a/b/c").read_bytes() == b"legit"


def test_a_symlinked_directory_planted_inside_is_not_followed(setup) -> None:
    conf, outside = setup
    (conf.root / "home").symlink_to(outside)
    for call in (lambda: conf.write("home/victim", b"x", replace=True),
                 lambda: conf.write("home/new", b"x"),
                 lambda: conf.mkdirs("home/sub"),
                 lambda: conf.symlink("/etc", "home/link")):
        with pytest.raises(ConfinedError, match="symlink"):
            call()
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_bytes() == b"precious"
    assert conf.read("home/victim") is None and conf.lstat("home/victim") is None
    assert list(conf.files("home")) == []
    conf.write("real/victim", b"legit")  # positive control
    assert conf.read("real/victim") == b"legit"


def test_a_symlinked_file_planted_inside_is_replaced_never_written_through(setup) -> None:
    conf, outside = setup
    (conf.root / "f").symlink_to(outside / "victim")
    with pytest.raises(Exists):
        conf.write("f", b"x")
    fd = -1
    with pytest.raises(ConfinedError, match="symlink"):
        fd = conf.open("f", os.O_WRONLY | os.O_TRUNC)
    assert fd == -1
    conf.write("f", b"new", 0o640, replace=True, mtime_ns=10**18)
    assert not (conf.root / "f").is_symlink() and (conf.root / "f").read_bytes() == b"new"
    assert stat.S_IMODE((conf.root / "f").stat().st_mode) == 0o640
    assert (conf.root / "f").stat().st_mtime_ns == 10**18
    assert (outside / "victim").read_bytes() == b"precious"
    assert sorted(p.name for p in conf.root.iterdir()) == ["f"]  # no temporary left


def test_reading_and_walking_never_follow_symlinks_nor_block_on_a_fifo(setup) -> None:
    conf, outside = setup
    conf.write("d/regular", b"mine")
    (conf.root / "d/link").symlink_to(outside / "victim")
    (conf.root / "d/dirlink").symlink_to(outside)
    os.mkfifo(conf.root / "d/fifo")
    done = threading.Event()

    def read_fifo() -> None:
        assert conf.read("d/fifo") is None
        done.set()

    threading.Thread(target=read_fifo, daemon=True).start()
    assert done.wait(30), "reading a FIFO blocked"
    assert conf.read("d/link") is None
    assert conf.read("d/regular") == b"mine"
    assert [rel for rel, *_ in conf.files("d")] == ["d/regular"]
    assert [rel for rel, *_ in conf.files()] == ["d/regular"]


def test_remove_tree_removes_what_a_run_left_read_only_and_not_what_links_name(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    top = tmp_path / "replay"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_bytes(b"x")
    (top / "a" / "link").symlink_to(outside)
    (top / "a" / "b").chmod(0o500)
    assert remove_tree(top)
    assert not top.exists() and (outside / "victim").read_bytes() == b"precious"


def _experiment(work: Path, path: str, digest: str) -> Experiment:
    entry = [path, 5, 0, 0o100644, None, digest, None]
    command = SimpleNamespace(id=7, working_dir=str(work), text="true", return_value=0,
                              hash_chunk_size=None, hash_max_reads=None, reads=[], writes=[])
    manifest = {"reads": [entry], "writes": [entry], "env": {}, "argv": ["true"],
                "umask": 0o022, "hostname": None}
    return Experiment(command, manifest)  # type: ignore[arg-type]


def test_the_replay_plan_does_not_follow_a_symlink_planted_in_outdir(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = Archive(tmp_path / "archive")
    digest, _ = archive.put(b"hello")
    exp = _experiment(work, str(work / "out.txt"), digest)
    outside = tmp_path / "outside"
    outside.mkdir()
    outdir = tmp_path / "o"
    first = mirror(str(work)).split("/")[0]
    outdir.mkdir()
    (outdir / first).symlink_to(outside)
    with Confined(outdir) as out, pytest.raises(ReplayError, match="symlink"):
        plan(exp, out, archive, False, "bwrap")
    assert list(outside.iterdir()) == []
    # Positive control: into a clean OUTDIR the copy is written.
    with Confined(tmp_path / "clean", create=True) as out:
        args, _env, _umask, notes = plan(exp, out, archive, False, "bwrap")
    assert (tmp_path / "clean" / mirror(str(work)) / "out.txt").read_bytes() == b"hello"
    assert notes["writable"] == [str(work)]
    assert ["--bind", str(tmp_path / "clean" / mirror(str(work))), str(work)] == \
        args[args.index("--bind"):args.index("--bind") + 3]


def test_the_replay_plan_refuses_an_unnormalised_path_naming_the_command(
    tmp_path: Path,
) -> None:
    archive = Archive(tmp_path / "archive")
    digest, _ = archive.put(b"hello")
    bad = "/../../" + str(tmp_path / "victim").lstrip("/")
    exp = _experiment(tmp_path, bad, digest)
    with Confined(tmp_path / "o", create=True) as out, pytest.raises(ReplayError) as info:
        plan(exp, out, archive, False, "bwrap")
    assert "command 7" in str(info.value) and repr(bad) in str(info.value)
    assert not (tmp_path / "victim").exists()
    assert content_digest(b"hello").hex() == digest


def test_a_directory_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with Confined(tmp_path) as conf:
        with pytest.raises(ConfinedError, match="file exists and is not a directory"):
            conf.mkdirs("file/sub")
        os.chmod(tmp_path, 0o500)
        try:
            if os.geteuid() != 0:  # root makes it anyway
                with pytest.raises(ConfinedError, match="cannot create .*Permission denied"):
                    conf.mkdirs("new")
        finally:
            os.chmod(tmp_path, 0o700)


def test_replay_refuses_before_making_outdir(tmp_path: Path) -> None:
    from shournal.reproduce.replay import replay

    exp = _experiment(tmp_path, "/a/../b", "0" * 32)
    plain = Experiment(exp.command, None)
    for bad in (exp, plain):
        with pytest.raises(ReplayError):
            replay(bad, tmp_path / "out" / "deeper")
        assert not (tmp_path / "out").exists()
