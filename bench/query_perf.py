"""Query performance on a synthetic journal of 1 million commands and 10
million file events (bench/journal_gen.py builds and caches it).

Measured (median and p95 over --reps queries, warm page cache unless said):

* ``--wfile`` of random probe files (files that exist on disk and whose
  content the journal records), through the library
  (``shournal.Journal.find``, as the CLI calls it: at most 10 files
  per command loaded) on an open store, and end to end through the real
  CLI process (``shournal query --wfile F``, interpreter start-up
  included; informative);
* ``--wfile`` of probes whose mtime on disk differs (found by the size +
  hash fallback), and ``--rfile``;
* ``--history 100``, library and CLI;
* cold cache (``echo 3 > /proc/sys/vm/drop_caches`` before each query; needs
  root, skipped otherwise): the first ``--wfile`` and ``--history 100`` of a
  fresh store and of a fresh CLI process;
* an HTML report of 1,000 commands, if ``shournal.report.html.write_html``
  exists;
* the journal's size per file event, and per table and index (dbstat);
* EXPLAIN QUERY PLAN of every statement the measured queries ran.

Targets (issue 3): --wfile median <= 50 ms, --history 100 <= 200 ms, HTML
of 1,000 commands <= 2 s, <= 100 bytes per file event.

    nice .venv/bin/python bench/query_perf.py            # writes results/query_perf.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import journal_gen  # noqa: E402

from shournal import Journal  # noqa: E402
from shournal.store.db import Store  # noqa: E402

HUMAN_MAX_FILES = 10  # what `shournal query` loads per command for human output
TARGETS = {"wfile_ms": 50, "history_ms": 200, "html_s": 2.0, "bytes_per_event": 100}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def summary(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    out: dict[str, Any] = {"n": len(values)}
    if not values:
        return out
    out["median"] = statistics.median(values)
    out["p95"] = statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 \
        else values[0]  # fmt: skip
    out["min"], out["max"] = values[0], values[-1]
    return out


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


# ------------------------------------------------------------------- sizes


def journal_size(db: Path, events: int, commands: int) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        by_object = dict(
            con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        )
    finally:
        con.close()
    size = db.stat().st_size
    wal = Path(f"{db}-wal")
    if wal.exists():
        size += wal.stat().st_size
    return {
        "bytes": size,
        "bytes_per_event": size / events,
        "bytes_per_command": size / commands,
        "bytes_per_event_by_object": {k: v / events for k, v in by_object.items() if v > 8192},
    }


# ------------------------------------------------------------------ library


class Capture:
    """Collects the SQL a store runs, for EXPLAIN QUERY PLAN."""

    def __init__(self, journal: Journal) -> None:
        from sqlalchemy import event

        self.statements: list[tuple[str, Any]] = []
        self.on = False

        @event.listens_for(journal._store.engine, "before_cursor_execute")
        def _capture(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
            if self.on:
                self.statements.append((statement, parameters))


def plans(db: Path, statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    out = []
    try:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT") or "sqlite_master" in sql:
                continue
            rows = con.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            out.append({"sql": " ".join(sql.split())[:400], "plan": [r[3] for r in rows]})
    finally:
        con.close()
    return out


def time_library(
    journal: Journal, probes: list[dict], kind: str, check: bool = True
) -> tuple[list[float], int]:
    """Seconds per Journal.find call; and how many missed their command."""
    times, misses = [], 0
    opt = "wfile" if kind == "write" else "rfile"
    for p in probes:
        t0 = time.perf_counter()
        found = journal.find(**{opt: p["path"]}, max_files=HUMAN_MAX_FILES)
        times.append(time.perf_counter() - t0)
        if check and p["command_id"] not in {c.id for c in found}:
            misses += 1
    return times, misses


def time_history(journal: Journal, n: int, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        found = journal.find(history=n, max_files=HUMAN_MAX_FILES)
        times.append(time.perf_counter() - t0)
        assert len(found) == n
    return times


def time_other(journal: Journal, db: Path, reps: int) -> dict[str, Any]:
    """Other criteria (no target in the issue; informative): values drawn
    from the journal's middle."""
    con = sqlite3.connect(db)
    try:
        mid = con.execute("SELECT max(id) / 2 FROM command").fetchone()[0]
        cwd, session = con.execute(
            "SELECT w.path, s.uuid FROM command c JOIN shell_session s "
            "ON s.id = c.session_id JOIN working_dir w ON w.id = c.cwd_id "
            "WHERE c.id >= ? ORDER BY c.id LIMIT 1",
            (mid,),
        ).fetchone()
    finally:
        con.close()
    # --wfile of an empty file: matched on size 0 and the mtime alone.
    empty = Path(f"{db}.probes") / "empty-write"
    empty.write_bytes(b"")
    con = sqlite3.connect(db)
    try:
        (mtime,) = con.execute(
            "SELECT mtime_ns FROM write_event WHERE size = 0 AND command_id >= ? LIMIT 1", (mid,)
        ).fetchone()
    finally:
        con.close()
    os.utime(empty, ns=(mtime, mtime))
    cases: dict[str, dict[str, Any]] = {
        "wfile_empty": {"wfile": empty},
        "command_text_like_history100": {"command_text": "%snakemake%", "history": 100},
        "command_text_like_limit100": {"command_text": "%snakemake%", "limit": 100},
        "cwd_exact": {"cwd": cwd},
        "cwd_exact_history100": {"cwd": cwd, "history": 100},
        "session": {"session_id": bytes(session)},
    }
    out: dict[str, Any] = {}
    for name, kwargs in cases.items():
        times, found = [], 0
        for _ in range(reps):
            t0 = time.perf_counter()
            found = len(journal.find(max_files=HUMAN_MAX_FILES, **kwargs))
            times.append(time.perf_counter() - t0)
        out[name] = summary(times) | {"commands": found}
    return out


def time_html(journal: Journal, n: int) -> dict[str, Any]:
    try:
        from shournal.report.html import write_html  # type: ignore[import-not-found]
    except ImportError:
        return {"status": "not measured yet (shournal.report.html.write_html not importable)"}
    t0 = time.perf_counter()
    commands = journal.find(history=n)  # every file, as a report needs
    t_query = time.perf_counter() - t0
    # The signature is the other engineer's: a text file, or else binary.
    t_write, size, error = None, 0, ""
    for mode in ("w", "wb"):
        with tempfile.NamedTemporaryFile(mode, suffix=".html", delete=False) as fp:
            name = fp.name
            t1 = time.perf_counter()
            try:
                write_html(commands, fp)
            except TypeError as e:
                error = f"{type(e).__name__}: {e}"
                continue
            finally:
                fp.flush()
                size = os.path.getsize(name)
                os.unlink(name)
            t_write = time.perf_counter() - t1
            break
    if t_write is None:
        return {"status": f"write_html failed ({error})"}
    return {
        "status": "measured",
        "commands": len(commands),
        "events": sum(len(c.writes) + len(c.reads) for c in commands),
        "query_s": t_query,
        "write_html_s": t_write,
        "total_s": t_query + t_write,
        "html_bytes": size,
    }


# ---------------------------------------------------------------------- CLI


def cli_env(url: str, home: Path) -> dict[str, str]:
    # A private config/runtime dir: the query must not see (or wait for)
    # anything of the user running the benchmark.
    env = dict(os.environ)
    env.update(
        SHOURNAL_DB_URL=url,
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_RUNTIME_DIR=str(home / "run"),
    )
    return env


def time_cli(exe: str, args: list[str], env: dict[str, str], expect: int = 0) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([exe, *args], env=env, capture_output=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != expect:
        raise RuntimeError(
            f"shournal {' '.join(args)}: exit {proc.returncode}: {proc.stderr.decode().strip()}"
        )
    return elapsed



# --------------------------------------------------------------- PostgreSQL

PG_BIN = Path(os.environ.get("SHOURNAL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
# Copied in this order (foreign keys); schema_version is written by Store.
PG_TABLES = ("env", "hash_setting", "shell_session", "working_dir", "directory", "content",
             "command", "write_event", "read_file", "read_event")  # fmt: skip


@contextmanager
def private_pg() -> Iterator[str]:
    """A throw-away PostgreSQL server on a unix socket (as in
    tests/fixtures_pg.py; under root it runs as ``nobody``)."""
    import pwd

    def as_server(argv: list[str]) -> list[str]:
        return ["runuser", "-u", "nobody", "--", *argv] if os.geteuid() == 0 else argv

    base = Path(tempfile.mkdtemp(prefix="shq-pg-", dir="/var/tmp"))
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
    data, logfile = base / "data", base / "server.log"
    pg_ctl = str(PG_BIN / "pg_ctl")
    try:
        subprocess.run(as_server([str(PG_BIN / "initdb"), "-D", str(data), "-U", "shournal",
                                  "--auth=trust", "--no-sync"]),
                       check=True, capture_output=True)  # fmt: skip
        options = f"-c listen_addresses='' -c unix_socket_directories='{base}' -c fsync=off"
        subprocess.run(as_server([pg_ctl, "-D", str(data), "-l", str(logfile), "-o", options,
                                  "-w", "start"]), check=True, capture_output=True)  # fmt: skip
        import psycopg

        with psycopg.connect(host=str(base), user="shournal", dbname="postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute("CREATE DATABASE journal")
        yield f"postgresql+psycopg://shournal@/journal?host={base}"
    finally:
        subprocess.run(as_server([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


def copy_to_pg(db: Path, url: str) -> float:
    """Copy every row of the SQLite journal into a fresh PostgreSQL journal
    (schema by Store, rows by COPY); return the seconds it took."""
    import psycopg
    from sqlalchemy.engine import make_url

    t0 = time.perf_counter()
    Store(url).close()  # the real schema, schema_version included
    parsed = make_url(url)
    src = sqlite3.connect(db)
    with psycopg.connect(host=parsed.query["host"], user=parsed.username,
                         dbname=parsed.database) as dst:  # fmt: skip
        for table in PG_TABLES:
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            times = {i for i, c in enumerate(cols) if c in ("start_time", "end_time")}
            with dst.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                for row in src.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                    if times:
                        row = tuple(v + "+00" if i in times else v for i, v in enumerate(row))
                    copy.write_row(row)
            # Ids were copied explicitly: move the sequences past them.
            if "id" in cols:
                dst.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT coalesce(max(id), 1) FROM {table}))"
                )
            log(f"PostgreSQL: {table} copied")
        dst.commit()
        dst.autocommit = True
        dst.execute("VACUUM ANALYZE")
    src.close()
    return time.perf_counter() - t0


def pg_explain(journal: Journal, statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    out = []
    with journal._store.engine.connect() as conn:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT") or "pg_catalog" in sql:
                continue
            rows = conn.exec_driver_sql("EXPLAIN " + sql, params).fetchall()
            out.append({"sql": " ".join(sql.split())[:400], "plan": [r[0] for r in rows]})
    return out


def measure_pg(db: Path, meta: dict, reps: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    probes = meta["probes"]
    exact = [p for p in probes if p["kind"] == "write" and p["mtime_matches"]]
    fallback = [p for p in probes if p["kind"] == "write" and not p["mtime_matches"]]
    out: dict[str, Any] = {}
    with private_pg() as url:
        out["copy_s"] = copy_to_pg(db, url)
        with Journal.open(url) as journal:
            with journal._store.reading() as conn:
                from sqlalchemy import text

                out["database_bytes"] = conn.execute(
                    text("SELECT pg_database_size(current_database())")
                ).scalar_one()
                out["server_version"] = conn.execute(text("SHOW server_version")).scalar_one()
            out["bytes_per_event"] = out["database_bytes"] / meta["file_events"]
            cap = Capture(journal)
            time_library(journal, exact[:3], "write")
            time_history(journal, 100, 2)
            cap.on = True
            time_library(journal, exact[:1], "write")
            time_history(journal, 100, 1)
            cap.on = False
            out["plans"] = pg_explain(journal, cap.statements)
            sample = rng.sample(exact, min(reps, len(exact)))
            t, miss = time_library(journal, sample, "write")
            out["wfile"] = summary(t) | {"misses": miss}
            t, miss = time_library(journal, fallback[:reps], "write")
            out["wfile_fallback"] = summary(t) | {"misses": miss}
            out["history100"] = summary(time_history(journal, 100, reps))
    return out


# -------------------------------------------------------------------- main


def ms(s: dict[str, Any], key: str = "median") -> str:
    return "n/a" if key not in s else f"{s[key] * 1000:.1f}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    meta = journal_gen.ensure_journal(
        args.db, args.commands, args.events, args.seed, args.probes, log=log
    )
    db: Path = args.db
    url = f"sqlite:///{db}"
    rng = random.Random(args.seed)
    probes = meta["probes"]
    exact = [p for p in probes if p["kind"] == "write" and p["mtime_matches"]]
    fallback = [p for p in probes if p["kind"] == "write" and not p["mtime_matches"]]
    reads = [p for p in probes if p["kind"] == "read"]
    result: dict[str, Any] = {
        "benchmark": "query_perf",
        "machine": {
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_before": os.getloadavg()[0],
        },
        "journal": {k: v for k, v in meta.items() if k != "probes"},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "targets": TARGETS,
    }
    log("spot checks (library and CLI)")
    result["validation_failures"] = journal_gen.validate(db, meta, shournal_bin=args.shournal)
    result["size"] = journal_size(db, meta["file_events"], meta["commands"])

    lib: dict[str, Any] = {}
    with Journal.open(url) as journal:
        cap = Capture(journal)
        log("library: warm-up")
        time_library(journal, exact[:3], "write")
        time_history(journal, 100, 2)
        sample = rng.sample(exact, min(args.reps, len(exact)))
        cap.on = True
        t, miss = time_library(journal, sample[:1], "write")
        result["plans_wfile"] = plans(db, cap.statements)
        cap.statements.clear()
        time_history(journal, 100, 1)
        result["plans_history"] = plans(db, cap.statements)
        cap.statements.clear()
        cap.on = False
        log(f"library: --wfile x{len(sample)}")
        t, miss = time_library(journal, sample, "write")
        lib["wfile"] = summary(t) | {"misses": miss}
        t, miss = time_library(journal, fallback[: args.reps], "write")
        lib["wfile_fallback"] = summary(t) | {"misses": miss}
        t, miss = time_library(journal, reads[: args.reps], "read")
        lib["rfile"] = summary(t) | {"misses": miss}
        log(f"library: --history 100 x{args.reps}")
        lib["history100"] = summary(time_history(journal, 100, args.reps))
        log("library: other criteria")
        result["other_criteria"] = time_other(journal, db, 5)
        log("html report of 1,000 commands")
        result["html_1000"] = time_html(journal, 1000)
    result["library"] = lib

    cold: dict[str, Any] = {}
    if args.cold and drop_caches():
        log(f"cold cache x{args.cold}")
        wf, hist, first_open = [], [], []
        for p in rng.sample(exact, min(args.cold, len(exact))):
            drop_caches()
            t0 = time.perf_counter()
            with Journal.open(url) as journal:
                first_open.append(time.perf_counter() - t0)
                wf += time_library(journal, [p], "write")[0]
            drop_caches()
            with Journal.open(url) as journal:
                hist += time_history(journal, 100, 1)
        cold["library_open"] = summary(first_open)
        cold["library_wfile"] = summary(wf)
        cold["library_history100"] = summary(hist)
    else:
        cold["status"] = "not measured (cannot drop caches: needs root)" if args.cold else "off"

    cli: dict[str, Any] = {}
    if args.cli_reps:
        exe = args.shournal
        with tempfile.TemporaryDirectory() as home:
            env = cli_env(url, Path(home))
            log(f"CLI: --wfile / --history 100 x{args.cli_reps}")
            cli["version"] = summary([time_cli(exe, ["version"], env) for _ in range(5)])
            sample = rng.sample(exact, min(args.cli_reps, len(exact)))
            cli["wfile"] = summary([time_cli(exe, ["query", "--wfile", p["path"]], env)
                                    for p in sample])  # fmt: skip
            cli["history100"] = summary(
                [time_cli(exe, ["query", "--history", "100"], env) for _ in range(args.cli_reps)]
            )
            if args.cold and "status" not in cold:
                wf, hist = [], []
                for p in sample[: args.cold]:
                    drop_caches()
                    wf.append(time_cli(exe, ["query", "--wfile", p["path"]], env))
                    drop_caches()
                    hist.append(time_cli(exe, ["query", "--history", "100"], env))
                cold["cli_wfile"] = summary(wf)
                cold["cli_history100"] = summary(hist)
    result["cli"] = cli
    if args.pg:
        log("PostgreSQL: copying the journal into a private server")
        result["postgresql"] = measure_pg(db, meta, args.reps, args.seed)
    result["cold"] = cold
    result["load_after"] = os.getloadavg()[0]
    return result


def report(r: dict[str, Any]) -> str:
    lib, cli, cold, size = r["library"], r["cli"], r["cold"], r["size"]
    j = r["journal"]
    lines = [
        f"journal: {j['commands']:,} commands, {j['file_events']:,} file events, "
        f"{size['bytes'] / 1e6:.0f} MB = {size['bytes_per_event']:.1f} bytes/event "
        f"(target <= {TARGETS['bytes_per_event']})",
        "",
        "| query | library median | p95 | CLI median | p95 | cold library | cold CLI |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, key in (("--wfile", "wfile"), ("--history 100", "history100")):
        lines.append(
            f"| {name} | {ms(lib[key])} ms | {ms(lib[key], 'p95')} ms "
            f"| {ms(cli.get(key, {}))} ms | {ms(cli.get(key, {}), 'p95')} ms "
            f"| {ms(cold.get('library_' + key, {}))} ms | {ms(cold.get('cli_' + key, {}))} ms |"
        )
    for name, key in (("--wfile (mtime differs)", "wfile_fallback"), ("--rfile", "rfile")):
        lines.append(f"| {name} | {ms(lib[key])} ms | {ms(lib[key], 'p95')} ms | | | | |")
    if "version" in cli:
        lines.append(f"\n`shournal version` (start-up alone): {ms(cli['version'])} ms")
    html = r["html_1000"]
    if html["status"] == "measured":
        lines.append(
            f"HTML of {html['commands']} commands: query {html['query_s']:.2f} s + "
            f"write_html {html['write_html_s']:.2f} s = {html['total_s']:.2f} s"
        )
    else:
        lines.append(f"HTML of 1,000 commands: {html['status']}")
    pg = r.get("postgresql")
    if pg:
        lines.append(
            f"PostgreSQL {pg['server_version']}: --wfile median {ms(pg['wfile'])} ms "
            f"(p95 {ms(pg['wfile'], 'p95')}), fallback {ms(pg['wfile_fallback'])} ms, "
            f"--history 100 {ms(pg['history100'])} ms (p95 {ms(pg['history100'], 'p95')}); "
            f"{pg['bytes_per_event']:.1f} bytes/event; copy {pg['copy_s']:.0f} s"
        )
    for name, o in r.get("other_criteria", {}).items():
        lines.append(f"{name}: {ms(o)} ms ({o['commands']} commands)")
    misses = sum(v.get("misses", 0) for v in lib.values())
    lines.append(f"probes not found: {misses}; spot-check failures: {r['validation_failures']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    journal_gen.journal_args(p)
    p.add_argument("--probes", type=int, default=200)
    p.add_argument("--reps", type=int, default=30, help="library queries per kind")
    p.add_argument("--cli-reps", type=int, default=30, help="CLI runs per kind (0: none)")
    p.add_argument("--cold", type=int, default=5, help="cold-cache queries per kind (0: none)")
    p.add_argument("--shournal", default=str(Path(sys.executable).with_name("shournal")),
                   help="the shournal executable for the CLI runs")  # fmt: skip
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--pg", action="store_true",
                   help="also copy the journal into a private PostgreSQL server and query it")
    p.add_argument("--tag", default="")
    args = p.parse_args(argv)
    os.nice(10)  # the machine is shared
    result = run(args)
    text = report(result)
    result["report"] = text
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"query_perf{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(text)
    print(f"\nwritten {out}")
    return 1 if result["validation_failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

