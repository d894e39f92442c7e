"""A synthetic journal for the query benchmark (bench/query_perf.py).

Builds a SQLite journal of N commands and M file events (default 1 million
and 10 million) with the real schema (created by ``shournal.store.Store``,
so indexes, constraints and the schema version are exactly what shournal
creates), then bulk-inserts rows with the sqlite3 module into the same
tables.  The indexes exist during the load, so their pages are as
fragmented as in a journal that grew command by command.

What it looks like (all drawn from one seeded ``random.Random``):

* sessions of log-normal length (median 15 commands), several open at a
  time and interleaved in time, most on one host/user, some on cluster
  nodes; a session works in one to three projects and keeps its cwd for a
  while;
* projects with deep directory trees (src/core/io/, data/raw/2021-03/,
  build/CMakeFiles/x.dir/, .git/objects/ab/ ...), reused by many commands;
* command texts from a vocabulary of real tools and their arguments
  (git, make, gcc, python3, Rscript, snakemake, cp, rsync, tar, vim ...),
  each kind with its own read/write profile: ls writes nothing, make reads
  and writes hundreds, cp -a writes copies that keep size, hash and mtime;
* files: log-normal sizes (median 4 KiB, up to GBs), 2% empty (no hash),
  writes are new versions (new hash and mtime), reads reuse a recorded
  version of the project's files (same size, hash, mtime); ~65% of events
  are reads; mktemp directories under /tmp;
* archived scripts: reads of ``*.sh`` files carry their content,
  deduplicated (one row per distinct version);
* a few commands with hashing disabled (no hash, no hash setting).

Probe files: ``--probes`` commands get one written file whose content
really exists on disk (``<db>.probes/``, random bytes, real partial hash,
mtime set), so ``--wfile``/``--rfile`` can be asked for real.  Some probes
keep a different mtime on disk (as after wget or a copy without -p): they
are found only by the size + hash fallback.  ``<db>.json`` describes the
journal (counts, seed, schema) and lists the probes with the command each
must find; the journal is regenerated when the schema or the generator
changes.

    nice .venv/bin/python bench/journal_gen.py                 # 1M / 10M
    .venv/bin/python bench/journal_gen.py --commands 2000 --events 20000 \\
        --db /tmp/small.sqlite --force
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import math
import os
import random
import sqlite3
import string
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))

from shournal.hashing import partial_xxh64  # noqa: E402
from shournal.record import CommandRecord  # noqa: E402
from shournal.store import models as m  # noqa: E402
from shournal.store.db import Store  # noqa: E402
from shournal.store.migrations import SCHEMA_VERSION  # noqa: E402

CACHE = Path(os.environ.get("SHOURNAL_BENCH_CACHE", "/var/tmp/shournal-bench"))
DEFAULT_DB = CACHE / "journal-1M.sqlite"

# Bump when the output of the generator changes for the same arguments.
GENERATOR_VERSION = 2

CHUNK_SIZE, MAX_READS = 256, 3  # the default hash setting
MAX_EVENTS_PER_KIND = 5000  # the default per-command caps
SCRIPT_MAX_SIZE = 500 * 1024  # the default archive limit
START = datetime(2022, 1, 3, 8, 0, tzinfo=UTC)

# ----------------------------------------------------------------- vocabulary

DIR_WORDS = (
    "src core io util utils lib include tests test docs doc scripts bin data raw "
    "processed results fig figures plots notebooks analysis pipeline config conf "
    "build out tmp logs log models cache assets static templates api server client "
    "common internal pkg cmd tools vendor third_party examples bench reports tables "
    "reference align counts qc trim fastq bam vcf annotation stats cluster jobs "
    "slurm envs workflow rules modules parser net db sql migrations web ui"
).split()
PROJECT_WORDS = (
    "rnaseq chipseq atac variant-calling phylo metagenomics imaging segmentation "
    "climate-model cfd solver thesis paper2023 grant-report website dotfiles "
    "kernel-patches linux-tools compiler parser-lab ml-baseline transformer "
    "benchmark simulation mc-sampler fem-mesh qpcr proteomics survey-analysis "
    "dashboard backend frontend infra ansible terraform homelab notes scraper"
).split()
AREAS = ("projects", "src", "work", "research", "code", "git", "scratch")
STEMS = (
    "main util utils io parser config model train eval plot report sample "
    "run analysis helpers test_core test_io setup index reader writer cli "
    "server client app module common stats filter align count merge split "
    "normalize cluster export import summary table figure data results log"
).split()
EXTS = (
    ("c", 6), ("h", 5), ("o", 8), ("py", 10), ("pyc", 4), ("R", 2), ("sh", 1),
    ("csv", 8), ("tsv", 5), ("txt", 6), ("log", 6), ("json", 4), ("yaml", 2),
    ("md", 2), ("png", 3), ("pdf", 2), ("fastq.gz", 2), ("bam", 1), ("vcf.gz", 1),
    ("tex", 1), ("ipynb", 1), ("rs", 2), ("go", 1), ("js", 2), ("html", 1), ("so", 1),
)  # fmt: skip
USERS = ("alice", "bob", "carol")
HOSTS = ("ws-alice", "node017", "node042", "login01")


def _weighted(pairs: tuple[tuple[str, int], ...]) -> list[str]:
    return [name for name, weight in pairs for _ in range(weight)]


EXT_POOL = _weighted(EXTS)


@dataclass(frozen=True)
class Kind:
    """A kind of command line and its file-event profile."""

    name: str
    weight: int
    texts: tuple[str, ...]
    reads: float  # log-normal median of read events (0: none)
    writes: float
    sigma: float = 1.0
    copy: bool = False  # writes are copies of the reads


KINDS: tuple[Kind, ...] = (
    Kind("nav", 26, ("ls", "ls -la", "cd {dir}", "pwd", "clear", "history | tail",
                     "ls -lh {dir}", "echo $PATH", "du -sh {dir}", "df -h", "top"), 0, 0),
    Kind("view", 14, ("cat {r}", "less {r}", "head -n 20 {r}", "tail -f {r}", "wc -l {r}",
                      "grep -n TODO {r}", "zcat {r} | head", "diff {r} {r2}",
                      "md5sum {r}", "file {r}"), 1.5, 0),
    Kind("search", 4, ("grep -rn '{word}' {dir}", "rg {word}", "find . -name '*.{ext}'",
                       "grep -ril {word} .", "ag {word} src"), 12, 0, 1.4),
    Kind("edit", 10, ("vim {w}", "nano {w}", "emacs -nw {w}", "vi {w}", "code {w}"), 1, 2, 0.4),
    Kind("git", 12, ("git status", "git diff", "git log --oneline | head", "git add -A",
                     "git commit -m '{msg}'", "git pull --rebase", "git checkout {branch}",
                     "git stash", "git push", "git fetch origin",
                     "git rebase -i HEAD~3"), 14, 3, 1.5),
    Kind("build", 5, ("make -j4", "make", "make -j8 all", "cmake --build build",
                      "cargo build --release", "ninja -C build", "make clean && make -j2",
                      "gcc -O2 -Wall -c {r} -o {w}", "go build ./...", "npm run build"),
         45, 12, 1.8),
    Kind("run", 12, ("python3 {r} --input {r2} -o {w}", "Rscript {r} {r2}",
                     "./{r} {r2} > {w}", "bash {r} {r2}", "python3 -m pytest -q",
                     "snakemake -j 4 --use-conda", "sbatch {r}",
                     "python3 {r} --epochs 20 --out {w}", "jupyter nbconvert --execute {r}",
                     "julia {r}", "./run.sh {r2}"), 6, 2, 1.5),
    Kind("copy", 5, ("cp -a {r} {dir}/", "rsync -a {dir} {dir2}/", "cp {r} {w}",
                     "tar xzf {r}", "unzip -q {r}", "mv {r} {w}", "scp {r} node017:{dir}/",
                     "cp -r {dir} {dir2}"), 4, 0, 1.6, copy=True),
    Kind("fetch", 3, ("wget -q https://example.org/{w}", "curl -LO https://example.org/{w}",
                      "pip install -r requirements.txt", "conda env create -f envs/{w}",
                      "git clone https://example.org/{word}.git"), 2, 6, 1.8),
    Kind("misc", 9, ("sort -u {r} > {w}", "awk '{{print $1}}' {r} > {w}",
                     "sed -i 's/{word}/{word2}/g' {w}", "gzip -k {r}", "touch {w}",
                     "samtools sort -o {w} {r}", "convert {r} {w}", "pandoc {r} -o {w}",
                     "xz -9 {r}", "jq . {r} > {w}"), 1.5, 1, 0.6),
)  # fmt: skip
KIND_POOL = [k for k in KINDS for _ in range(k.weight)]
WORDS = (
    "error TODO fixme timeout cache parse import config seed sample batch "
    "threshold alpha beta delta kernel buffer socket retry"
).split()
MSGS = (
    "fix typo", "WIP", "add tests", "refactor parser", "update results", "bump version",
    "fix off-by-one in reader", "add figure 3", "clean up", "merge upstream",
)
SCRIPT_LINES = (
    "#!/bin/bash", "set -euo pipefail", 'for f in data/raw/*.fastq.gz; do', "done",
    'echo "processing $1"', "module load samtools/1.17", "python3 scripts/plot.py \"$@\"",
    'mkdir -p "$OUT"', "export OMP_NUM_THREADS=4", 'if [[ -f "$1" ]]; then', "fi",
    "srun --ntasks=1 ./bin/solver --config conf/run.yaml", "make -j\"$(nproc)\"",
    'rsync -a results/ "$DEST"/', "# TODO: parallelise", 'samtools index "$bam"',
)  # fmt: skip


# ------------------------------------------------------------------ the state


@dataclass(slots=True)
class Entity:
    """One recorded version of a file."""

    dir_id: int
    basename: bytes
    size: int
    mtime_ns: int
    hash: bytes
    mode: int
    content_id: int | None  # -1: a script not archived yet (no command read it)
    read_file_id: int | None = None  # its read_file row, once a command read it


@dataclass
class Project:
    root: str  # with trailing slash
    dirs: list[str]  # directory paths with trailing slash (root first)
    pool: list[Entity] = field(default_factory=list)


@dataclass
class Session:
    uuid: bytes
    row_id: int
    env_id: int
    projects: list[Project]
    remaining: int
    cwd: str
    project: Project
    hashing: bool


@dataclass
class Probe:
    path: str  # the file on disk
    kind: str  # "write" or "read"
    command_id: int  # must be among the commands found
    stored_path: str  # the path the journal recorded
    size: int
    mtime_matches: bool  # False: only the size + hash fallback finds it


def _fmt_time(moment: datetime) -> str:
    """How SQLAlchemy's SQLite DATETIME stores a naive UTC value."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _lognormal_int(rng: random.Random, median: float, sigma: float) -> int:
    return int(rng.lognormvariate(math.log(median), sigma)) if median > 0 else 0


class Generator:
    """Draws commands and events and bulk-inserts them into ``con``."""

    def __init__(self, con: sqlite3.Connection, rng: random.Random, probe_dir: Path) -> None:
        self.con = con
        self.rng = rng
        self.probe_dir = probe_dir
        self.dir_ids: dict[str, int] = {}
        self.next_dir_id = 1
        self.next_content_id = 1
        self.next_session_id = 1
        self.content_rows: list[tuple] = []
        self.contents: dict[bytes, int] = {}
        self.dir_rows: list[tuple] = []
        self.cwd_ids: dict[str, int] = {}
        self.next_cwd_id = 1
        self.cwd_rows: list[tuple] = []
        self.command_rows: list[tuple] = []
        self.event_rows: list[tuple] = []  # write_event rows
        self.read_file_rows: list[tuple] = []
        self.read_event_rows: list[tuple] = []
        self.read_content: list[tuple] = []  # (content_id, read_file_id) set later
        self.read_files_with_content: set[int] = set()
        self.next_read_file_id = 1
        self.events = 0
        self.writes = 0
        self.content_bytes = 0
        self.probes: list[Probe] = []

    # -- rows -----------------------------------------------------------------

    def cwd_id(self, path: str) -> int:
        """The working_dir row of a cwd (text, no trailing slash)."""
        found = self.cwd_ids.get(path)
        if found is None:
            found = self.cwd_ids[path] = self.next_cwd_id
            self.next_cwd_id += 1
            self.cwd_rows.append((found, path))
        return found

    def dir_id(self, path: str) -> int:
        found = self.dir_ids.get(path)
        if found is None:
            found = self.dir_ids[path] = self.next_dir_id
            self.next_dir_id += 1
            raw = path.encode()
            self.dir_rows.append((found, raw, m.path_hash(raw)))
        return found

    def content_id(self, size: int) -> int:
        """A new archived script version of about ``size`` bytes."""
        rng = self.rng
        lines: list[str] = []
        total = 0
        while total < size:
            line = rng.choice(SCRIPT_LINES)
            if rng.random() < 0.5:
                line += f"  # {rng.choice(WORDS)} {rng.randrange(10**6)}"
            lines.append(line)
            total += len(line) + 1
        data = ("\n".join(lines) + "\n").encode()[:size]
        # Deduplicated by content, as the store does (the digest algorithm
        # differs, the uniqueness does not).
        digest = hashlib.blake2b(data, digest_size=16).digest()
        known = self.contents.get(digest)
        if known is not None:
            return known
        cid = self.contents[digest] = self.next_content_id
        self.next_content_id += 1
        self.content_rows.append((cid, m.CONTENT_DIGEST_ALGORITHM, digest, data))
        self.content_bytes += len(data)
        return cid

    def flush(self) -> None:
        con = self.con
        con.executemany(
            "INSERT INTO directory (id, path, path_hash) VALUES (?, ?, ?)", self.dir_rows
        )
        con.executemany("INSERT INTO working_dir (id, path) VALUES (?, ?)", self.cwd_rows)
        con.executemany(
            "INSERT INTO content (id, algorithm, digest, data) VALUES (?, ?, ?, ?)",
            self.content_rows,
        )
        con.executemany(
            "INSERT INTO command (id, text, return_value, start_time, end_time, cwd_id, "
            "session_id, env_id, hash_setting_id, dropped_writes, dropped_reads, lost_events) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.command_rows,
        )
        con.executemany(
            "INSERT INTO write_event (command_id, directory_id, basename, size, "
            "mtime_ns, hash, mode) VALUES (?, ?, ?, ?, ?, ?, ?)",
            # The store keeps the common mode as NULL (models.FileMode).
            [(*r[:6], m.stored_mode(r[6])) for r in self.event_rows],
        )
        con.executemany(
            "INSERT INTO read_file (id, directory_id, basename, size, mtime_ns, hash, mode, "
            "content_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*r[:6], m.stored_mode(r[6]), *r[7:]) for r in self.read_file_rows],
        )
        con.executemany(
            "INSERT INTO read_event (command_id, read_file_id) VALUES (?, ?)",
            self.read_event_rows,
        )
        con.executemany("UPDATE read_file SET content_id = ? WHERE id = ?", self.read_content)
        for rows in (self.dir_rows, self.cwd_rows, self.content_rows, self.command_rows,
                     self.event_rows, self.read_file_rows, self.read_event_rows,
                     self.read_content):  # fmt: skip
            rows.clear()

    # -- the world ------------------------------------------------------------

    def make_projects(self, count: int) -> list[Project]:
        rng = self.rng
        projects = []
        for i in range(count):
            user = USERS[0] if rng.random() < 0.85 else rng.choice(USERS[1:])
            name = f"{rng.choice(PROJECT_WORDS)}-{i}" if rng.random() < 0.7 else f"p{i}"
            root = f"/home/{user}/{rng.choice(AREAS)}/{name}/"
            dirs = [root]
            # A tree: each new directory hangs below a random existing one,
            # which yields a few deep chains and many shallow siblings.
            for _ in range(_lognormal_int(rng, 40, 0.9) + 2):
                parent = rng.choice(dirs)
                if parent.count("/") > 12:
                    parent = root
                word = rng.choice(DIR_WORDS)
                if rng.random() < 0.15:
                    word += f"-{rng.randrange(2015, 2026)}-{rng.randrange(1, 13):02d}"
                child = f"{parent}{word}/"
                if child not in dirs:
                    dirs.append(child)
            dirs.append(f"{root}.git/")
            projects.append(Project(root, dirs))
        return projects

    def new_basename(self, ext: str | None = None) -> bytes:
        rng = self.rng
        ext = ext or rng.choice(EXT_POOL)
        stem = rng.choice(STEMS)
        r = rng.random()
        if r < 0.35:
            stem += f"_{rng.randrange(1000):03d}"
        elif r < 0.45:
            stem += f"-{rng.choice(STEMS)}"
        return f"{stem}.{ext}".encode()

    def new_entity(self, dir_id: int, mtime_ns: int, hashing: bool, name: bytes | None = None,
                   size_median: float = 4096) -> Entity:  # fmt: skip
        rng = self.rng
        basename = name or self.new_basename()
        if rng.random() < 0.02:
            size = 0
        else:
            size = min(int(rng.lognormvariate(math.log(size_median), 2.2)) + 1, 60 << 30)
        h = rng.getrandbits(64).to_bytes(8, "little") if size and hashing else b""
        r = rng.random()
        mode = 0o100644 if r < 0.88 else (0o100755 if r < 0.97 else 0o100600)
        content = None
        if basename.endswith(b".sh"):
            mode = 0o100755
            size = min(int(rng.lognormvariate(math.log(1500), 0.9)) + 1, SCRIPT_MAX_SIZE)
            content = -1
        return Entity(dir_id, basename, size, mtime_ns, h, mode, content)

    # -- one command -------------------------------------------------------------

    def command(self, cid: int, s: Session, kind: Kind, start_ns: int, end_ns: int,
                n_reads: int, n_writes: int, probe: str | None) -> str:  # fmt: skip
        """Draw the events of command ``cid``; return its text."""
        rng = self.rng
        proj = s.project
        pool = proj.pool
        reads: list[Entity] = []
        writes: list[Entity] = []
        # The few directories this command works in, its cwd first.
        near = [s.cwd] + [rng.choice(proj.dirs) for _ in range(rng.randrange(1, 4))]
        chosen: set[int] = set()
        fallback = len(pool) - 1
        for _ in range(n_reads):
            if pool and rng.random() < 0.92:
                # Recent versions are read more often than old ones.  A
                # command reads a file once (the listener keys reads by
                # path): a few more draws, else a file it has not read.
                for _attempt in range(4):
                    idx = len(pool) - 1 - min(int(rng.expovariate(1 / 200)), len(pool) - 1)
                    if id(pool[idx]) not in chosen:
                        break
                else:
                    # Once read, a version stays read: the cursor only descends.
                    while fallback >= 0 and id(pool[fallback]) in chosen:
                        fallback -= 1
                    idx = fallback
                if idx >= 0:
                    chosen.add(id(pool[idx]))
                    reads.append(pool[idx])
                    continue
            old = start_ns - rng.randrange(10**9, 3 * 365 * 86400 * 10**9)
            ent = self.new_entity(self.dir_id(rng.choice(near)), old, s.hashing)
            pool.append(ent)
            chosen.add(id(ent))
            reads.append(ent)
        if kind.copy:
            # Copies keep size and content; cp -a / rsync -a / tar keep mtime.
            keep_mtime = rng.random() < 0.6
            dst = rng.choice(proj.dirs)
            for src in reads:
                mtime = src.mtime_ns if keep_mtime else end_ns - rng.randrange(10**9)
                writes.append(
                    Entity(self.dir_id(dst), src.basename, src.size, mtime, src.hash,
                           src.mode, src.content_id)  # fmt: skip
                )
        for _ in range(n_writes):
            mtime = start_ns + rng.randrange(max(end_ns - start_ns, 1))
            r = rng.random()
            if r < 0.03:
                tmp = f"/tmp/tmp.{''.join(rng.choices(string.ascii_letters, k=10))}/"
                writes.append(self.new_entity(self.dir_id(tmp), mtime, s.hashing))
                continue
            if pool and r < 0.45:
                # A new version of a file the project has.
                old = pool[rng.randrange(len(pool))]
                ent = self.new_entity(old.dir_id, mtime, s.hashing, name=old.basename,
                                      size_median=max(old.size, 64))  # fmt: skip
            else:
                ent = self.new_entity(self.dir_id(rng.choice(near)), mtime, s.hashing)
            writes.append(ent)
        for ent in writes:
            if len(pool) < 6000:
                pool.append(ent)
            else:
                pool[rng.randrange(len(pool))] = ent
        if probe is not None:
            target = writes if probe == "write" else reads
            if target:
                target[0] = self.make_probe(cid, probe, target[0], end_ns)
        # Archive at most 3 scripts per command, as the default config.
        scripts = 0
        for e in writes:
            self.event_rows.append(
                (cid, e.dir_id, e.basename, e.size, e.mtime_ns, e.hash, e.mode)
            )
        for e in reads:
            content = None
            if e.content_id is not None and scripts < 3:
                if e.content_id == -1:
                    e.content_id = self.content_id(e.size)
                content = e.content_id
                scripts += 1
            # A version is stored once (read_file), each read links to it.
            rf = e.read_file_id
            if rf is None:
                rf = e.read_file_id = self.next_read_file_id
                self.next_read_file_id += 1
                self.read_file_rows.append(
                    (rf, e.dir_id, e.basename, e.size, e.mtime_ns, e.hash, e.mode, content)
                )
                if content is not None:
                    self.read_files_with_content.add(rf)
            elif content is not None and rf not in self.read_files_with_content:
                self.read_content.append((content, rf))
                self.read_files_with_content.add(rf)
            self.read_event_rows.append((cid, rf))
        self.events += len(writes) + len(reads)
        self.writes += len(writes)
        return self.text(kind, s, reads, writes)

    def make_probe(self, cid: int, kind: str, like: Entity, end_ns: int) -> Entity:
        """A file on disk whose content the journal records for ``cid``."""
        rng = self.rng
        size = min(int(rng.lognormvariate(math.log(8192), 1.8)) + 1, 8 << 20)
        path = self.probe_dir / f"probe-{cid}.bin"
        path.write_bytes(rng.randbytes(size))
        mtime = like.mtime_ns if kind == "read" else end_ns - rng.randrange(10**9)
        matches = rng.random() >= 0.2
        # A fifth keep another mtime on disk (wget, cp without -p).
        os.utime(path, ns=(mtime, mtime if matches else mtime + 86400 * 10**9))
        fd = os.open(path, os.O_RDONLY)
        try:
            digest = partial_xxh64(fd, size, CHUNK_SIZE, MAX_READS)
        finally:
            os.close(fd)
        assert digest is not None
        ent = Entity(like.dir_id, like.basename, size, mtime, m.hash_to_bytes(digest),
                     0o100644, None)  # fmt: skip
        # The stored path is looked up after the load (see generate).
        self.probes.append(Probe(str(path), kind, cid, "", size, matches))
        return ent

    def text(self, kind: Kind, s: Session, reads: list[Entity], writes: list[Entity]) -> str:
        rng = self.rng

        def rel(ents: list[Entity], i: int) -> str:
            if len(ents) > i:
                return ents[i].basename.decode()
            return self.new_basename().decode()

        def a_dir() -> str:
            d = rng.choice(s.project.dirs)
            return d[len(s.project.root):].rstrip("/") or "."

        template = rng.choice(kind.texts)
        return template.format(
            r=rel(reads, 0), r2=rel(reads, 1), w=rel(writes, 0), dir=a_dir(), dir2=a_dir(),
            word=rng.choice(WORDS), word2=rng.choice(WORDS), ext=rng.choice(EXT_POOL),
            msg=rng.choice(MSGS), branch=rng.choice(("main", "dev", "fix-io", "feature/plot")),
        )  # fmt: skip


# -------------------------------------------------------------------- driving


def _event_counts(rng: random.Random, kinds: list[Kind], target: int) -> list[tuple[int, int]]:
    """(reads, writes) per command, scaled so that they sum to ``target``."""
    raw = []
    for k in kinds:
        r = _lognormal_int(rng, k.reads, k.sigma)
        w = 0 if k.copy else _lognormal_int(rng, k.writes, k.sigma)
        raw.append((r, w))
    total = sum(r + (r if k.copy else w) for (r, w), k in zip(raw, kinds, strict=True))
    factor = target / max(total, 1)
    out = []
    for r, w in raw:
        # Stochastic rounding keeps small counts (0, 1, 2) realistic.
        r = min(int(r * factor + rng.random()), MAX_EVENTS_PER_KIND)
        w = min(int(w * factor + rng.random()), MAX_EVENTS_PER_KIND)
        out.append((r, w))
    # Hit the target exactly: add or remove single events on random commands.
    diff = target - sum(r + (r if k.copy else w) for (r, w), k in zip(out, kinds, strict=True))
    candidates = [i for i, k in enumerate(kinds) if k.name in ("build", "git", "run", "search")]
    while diff != 0:
        i = rng.choice(candidates)
        r, w = out[i]
        if diff > 0 and w < MAX_EVENTS_PER_KIND:
            out[i] = (r, w + 1)
            diff -= 1
        elif diff < 0 and w > 0:
            out[i] = (r, w - 1)
            diff += 1
    return out


def _seed_command(store: Store) -> tuple[int, str]:
    """One command through the real API: the bulk rows must look like it."""
    start_ns = int(START.timestamp() * 1e9) - 3600 * 10**9 + 123456789
    rec = CommandRecord(
        text="echo seed > /tmp/seed.txt", return_value=0, start_ns=start_ns,
        end_ns=start_ns + 5 * 10**6, working_dir="/home/alice", username=USERS[0],
        hostname=HOSTS[0], session_uuid=bytes(16), hash_chunk_size=CHUNK_SIZE,
        hash_max_reads=MAX_READS,
    )  # fmt: skip
    cid = store.add_command(rec)
    expected = _fmt_time(datetime.fromtimestamp(start_ns // 10**9, UTC).replace(
        microsecond=start_ns % 10**9 // 1000, tzinfo=None))  # fmt: skip
    return cid, expected


def schema_fingerprint() -> str:
    """Changes whenever the tables or indexes shournal creates change."""
    from sqlalchemy.dialects import sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    parts = [str(SCHEMA_VERSION)]
    for table in m.Base.metadata.sorted_tables:
        parts.append(str(CreateTable(table).compile(dialect=sqlite.dialect())))
        parts += sorted(
            str(CreateIndex(ix).compile(dialect=sqlite.dialect())) for ix in table.indexes
        )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def generate(db: Path, commands: int, events: int, seed: int, probes: int,
             log: Callable[[str], None] = print) -> dict:  # fmt: skip
    """Write a fresh journal to ``db`` and its description to ``<db>.json``."""
    t0 = time.perf_counter()
    fingerprint = schema_fingerprint()  # of the schema the rows are written for
    rng = random.Random(seed)
    for suffix in ("", "-wal", "-shm", ".json"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    probe_dir = Path(f"{db}.probes")
    if probe_dir.exists():
        for f in probe_dir.iterdir():
            f.unlink()
    probe_dir.mkdir(parents=True, exist_ok=True)
    db.parent.mkdir(parents=True, exist_ok=True)

    with Store(f"sqlite:///{db}") as store:
        seed_id, seed_time = _seed_command(store)
    con = sqlite3.connect(db, isolation_level=None)
    stored = con.execute("SELECT start_time FROM command WHERE id = ?", (seed_id,)).fetchone()[0]
    if stored != seed_time:
        raise SystemExit(f"timestamp format changed: store wrote {stored!r}, we {seed_time!r}")
    # A throw-away cache: no rollback journal while loading, WAL again after.
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-1000000")  # 1 GB: the indexes stay in memory
    con.execute("PRAGMA foreign_keys=OFF")
    con.execute("BEGIN")

    envs = [(USERS[0], h) for h in HOSTS] + [(u, HOSTS[0]) for u in USERS[1:]]
    env_ids = {}
    for user, host in envs:
        con.execute("INSERT OR IGNORE INTO env (hostname, username) VALUES (?, ?)", (host, user))
        env_ids[(user, host)] = con.execute(
            "SELECT id FROM env WHERE hostname = ? AND username = ?", (host, user)
        ).fetchone()[0]
    hs_id = con.execute(
        "SELECT id FROM hash_setting WHERE chunk_size = ? AND max_reads = ?",
        (CHUNK_SIZE, MAX_READS),
    ).fetchone()[0]
    last_session = con.execute("SELECT coalesce(max(id), 0) FROM shell_session").fetchone()[0]
    next_session_row = last_session + 1

    gen = Generator(con, rng, probe_dir)
    gen.next_dir_id = con.execute("SELECT coalesce(max(id), 0) FROM directory").fetchone()[0] + 1
    for cwd_id, path in con.execute("SELECT id, path FROM working_dir"):
        gen.cwd_ids[path] = cwd_id
        gen.next_cwd_id = max(gen.next_cwd_id, cwd_id + 1)
    projects = gen.make_projects(max(commands // 700, 5))
    # Popularity of projects: a few are where most work happens.
    weights = [1 / (i + 1) ** 0.9 for i in range(len(projects))]

    n = commands - 1  # the seed command is the first
    kinds = [rng.choice(KIND_POOL) for _ in range(n)]
    seed_events = 0
    counts = _event_counts(rng, kinds, events - seed_events)
    probe_at = {}
    writing = [i for i, (r, w) in enumerate(counts) if w > 0]
    reading = [i for i, (r, w) in enumerate(counts) if r > 0 and not kinds[i].copy]
    for i in rng.sample(writing, min(probes, len(writing))):
        probe_at[i] = "write"
    for i in rng.sample(reading, min(probes // 4, len(reading))):
        probe_at.setdefault(i, "read")

    clock = int(START.timestamp() * 1e9)
    open_sessions: list[tuple[int, int, Session]] = []
    tie = 0

    def new_session(at: int) -> Session:
        nonlocal next_session_row, tie
        mine = rng.random() < 0.8
        user = USERS[0] if mine or rng.random() < 0.5 else rng.choice(USERS[1:])
        host = HOSTS[0] if user != USERS[0] or mine else rng.choice(HOSTS[1:])
        projs = rng.choices(projects, weights, k=rng.randint(1, 3))
        sess = Session(
            uuid=rng.randbytes(16), row_id=next_session_row, env_id=env_ids[(user, host)],
            projects=projs, remaining=_lognormal_int(rng, 15, 1.5) + 1,
            cwd=projs[0].root, project=projs[0], hashing=rng.random() > 0.002,
        )  # fmt: skip
        con.execute("INSERT INTO shell_session (id, uuid) VALUES (?, ?)",
                    (sess.row_id, sess.uuid))  # fmt: skip
        next_session_row += 1
        tie += 1
        heapq.heappush(open_sessions, (at, tie, sess))
        return sess

    cid = seed_id
    for i in range(n):
        # Keep one to four sessions open; a new one opens after a pause.
        while len(open_sessions) < rng.choice((1, 2, 2, 3)):
            new_session(clock + int(rng.expovariate(1 / 1800) * 1e9))
        at, _, s = heapq.heappop(open_sessions)
        clock = max(clock, at)
        cid += 1
        kind = kinds[i]
        if rng.random() < 0.12:
            if rng.random() < 0.3:
                s.project = rng.choice(s.projects)
            s.cwd = rng.choice(s.project.dirs[:-1])
        dur = int(rng.lognormvariate(math.log(0.3), 1.8) * 1e9)
        if kind.name == "build":
            dur *= 30
        start, end = clock, clock + dur
        n_reads, n_writes = counts[i]
        text = gen.command(cid, s, kind, start, end, n_reads, n_writes, probe_at.get(i))
        r = rng.random()
        rv = 0 if r < 0.9 else (1 if r < 0.96 else rng.choice((2, 127, 130, 137, 255)))
        cwd_id = gen.cwd_id(s.cwd.rstrip("/") or "/")
        gen.command_rows.append(
            (cid, text, rv, _fmt_time(datetime.fromtimestamp(start / 1e9, UTC)),
             _fmt_time(datetime.fromtimestamp(end / 1e9, UTC)), cwd_id,
             s.row_id, s.env_id, hs_id if s.hashing else None, 0, 0, 0)
        )  # fmt: skip
        s.remaining -= 1
        if s.remaining > 0:
            gap = int(rng.lognormvariate(math.log(10), 1.6) * 1e9)
            if rng.random() < 0.015:  # lunch, meetings, the night
                gap += int(rng.expovariate(1 / (3 * 3600)) * 1e9)
            tie += 1
            heapq.heappush(open_sessions, (end + gap, tie, s))
        if len(gen.event_rows) + len(gen.read_event_rows) >= 200_000:
            gen.flush()
        if (i + 1) % 100_000 == 0:
            con.execute("COMMIT")
            con.execute("BEGIN")
            log(f"{i + 1:,} commands, {gen.events:,} events, {time.perf_counter() - t0:.0f} s")
    gen.flush()
    con.execute("COMMIT")
    con.execute("PRAGMA journal_mode=WAL")
    total_events = sum(
        con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("write_event", "read_event")
    )
    total_commands = con.execute("SELECT count(*) FROM command").fetchone()[0]
    # Where each probe's stored path is, for the report.
    for p in gen.probes:
        files = (
            "write_event e" if p.kind == "write"
            else "read_event l JOIN read_file e ON e.id = l.read_file_id"
        )  # fmt: skip
        row = con.execute(
            f"SELECT d.path, e.basename FROM {files} JOIN directory d "
            "ON d.id = e.directory_id WHERE command_id = ? AND e.size = ? LIMIT 1",
            (p.command_id, p.size),
        ).fetchone()
        p.stored_path = (bytes(row[0]) + bytes(row[1])).decode() if row else ""
    con.close()
    meta = {
        "generator_version": GENERATOR_VERSION,
        "schema_fingerprint": fingerprint,
        "schema_version": SCHEMA_VERSION,
        "seed": seed,
        "commands": total_commands,
        "file_events": total_events,
        "writes": gen.writes,
        "reads": total_events - gen.writes,
        "read_files": gen.next_read_file_id - 1,
        "directories": gen.next_dir_id - 1,
        "archived_contents": gen.next_content_id - 1,
        "archived_bytes": gen.content_bytes,
        "sessions": next_session_row - 1,
        "projects": len(projects),
        "first_start": START.isoformat(),
        "last_start_ns": clock,
        "seconds": time.perf_counter() - t0,
        "requested": {"commands": commands, "events": events, "probes": probes},
        "probes": [p.__dict__ for p in gen.probes],
    }
    Path(f"{db}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def load_meta(db: Path) -> dict | None:
    try:
        return json.loads(Path(f"{db}.json").read_text())
    except (OSError, ValueError):
        return None


def ensure_journal(db: Path = DEFAULT_DB, commands: int = 1_000_000, events: int = 10_000_000,
                   seed: int = 1, probes: int = 200, force: bool = False,
                   log: Callable[[str], None] = print) -> dict:  # fmt: skip
    """The cached journal's description; generated first if it is missing,
    was made with other arguments, or the schema or generator changed."""
    meta = load_meta(db)
    wanted = {"commands": commands, "events": events, "probes": probes}
    fresh = (
        meta is not None
        and db.exists()
        and meta.get("requested") == wanted
        and meta.get("seed") == seed
        and meta.get("generator_version") == GENERATOR_VERSION
        and meta.get("schema_fingerprint") == schema_fingerprint()
    )
    if fresh and not force:
        assert meta is not None
        return meta
    log(f"generating {db} ({commands:,} commands, {events:,} events, seed {seed})")
    return generate(db, commands, events, seed, probes, log)


# -------------------------------------------------------------- validation


def validate(db: Path, meta: dict, samples: int = 5, shournal_bin: str | None = None) -> list[str]:
    """Spot checks: probe files are found by the library and the real CLI.
    Returns the failures (empty when all passed)."""
    from shournal import Journal

    failures = []
    rng = random.Random(0)
    probes = meta["probes"]
    chosen = rng.sample(probes, min(samples, len(probes)))
    url = f"sqlite:///{db}"
    with Journal.open(url) as journal:
        for p in chosen:
            arg = {"wfile" if p["kind"] == "write" else "rfile": p["path"]}
            found = journal.find(**arg)
            ids = [c.id for c in found]
            if p["command_id"] not in ids:
                failures.append(f"library: {p['kind']} probe {p['path']} not found ({ids})")
                continue
            cmd = next(c for c in found if c.id == p["command_id"])
            events = cmd.writes if p["kind"] == "write" else cmd.reads
            paths = {e.path.decode() for e in events if e.size == p["size"]}
            if p["stored_path"] not in paths:
                failures.append(f"library: stored path {p['stored_path']} missing in {paths}")
    exe = shournal_bin or str(Path(sys.executable).with_name("shournal"))
    env = dict(os.environ, SHOURNAL_DB_URL=url)
    for p in chosen:
        opt = "--wfile" if p["kind"] == "write" else "--rfile"
        out = subprocess.run(
            [exe, "query", opt, p["path"], "--output-format", "json"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if out.returncode != 0:
            failures.append(f"CLI {opt} {p['path']}: exit {out.returncode} {out.stderr.strip()}")
            continue
        ids = [c["id"] for c in json.loads(out.stdout)]
        if p["command_id"] not in ids:
            failures.append(f"CLI {opt} {p['path']}: command {p['command_id']} not in {ids}")
    # A file the journal has never seen.
    stranger = Path(f"{db}.probes") / "never-recorded.bin"
    stranger.write_bytes(random.Random(meta["seed"] + 99).randbytes(5000))
    out = subprocess.run([exe, "query", "--wfile", str(stranger)], capture_output=True,
                         text=True, env=env)  # fmt: skip
    if out.returncode != 1:
        failures.append(f"CLI --wfile of an unknown file: exit {out.returncode}, expected 1")
    return failures


def journal_args(p: argparse.ArgumentParser) -> None:
    """--db, --commands, --events, --seed: the generated journal (as
    ensure_journal takes them) a benchmark runs on."""
    p.add_argument("--db", type=Path, default=DEFAULT_DB)
    p.add_argument("--commands", type=int, default=1_000_000)
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    journal_args(p)
    p.add_argument("--probes", type=int, default=200, help="commands with a file on disk")
    p.add_argument("--force", action="store_true", help="regenerate even if cached")
    p.add_argument("--no-validate", action="store_true")
    args = p.parse_args(argv)
    os.nice(10)  # the machine is shared
    meta = ensure_journal(args.db, args.commands, args.events, args.seed, args.probes,
                          args.force)  # fmt: skip
    shown = {k: v for k, v in meta.items() if k != "probes"}
    print(json.dumps(shown, indent=1))
    if not args.no_validate:
        failures = validate(args.db, meta)
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        print("validation:", "failed" if failures else "ok")
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
