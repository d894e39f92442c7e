"""The fast path of `shournal query`: the questions a history tool is asked
all day, answered without typer (whose import alone costs several times
the query; bench/cli_startup.py).

Only these argument lists, each option at most once and in any order::

    query --history N [--wfile F] [--output-format human|json|jsonl]
    query --wfile F [--history N] [--output-format human|json|jsonl]

(``--opt=value`` too).  They are answered as :func:`shournal.cli.query.query`
answers them, step by step, through :class:`shournal.Journal` (which reads
a SQLite journal with sqlite3 alone) and the same renderers
(:mod:`shournal.cli._output`).  Everything else returns None before
anything is printed or waited for, and :func:`shournal.cli.main` runs the
command itself (:mod:`shournal.cli._direct`, or typer): other options, a
value the full parser would reject, a journal that is not a plain SQLite
file of the current schema (the store must open it), a missing journal, a
file that cannot be probed, any error of the journal.
"""

from __future__ import annotations

from shournal.cli import EXIT_FOUND, EXIT_NOT_FOUND

# Each import here is paid by every `shournal query --history N`:
# tests/unit/test_cli_fast_path.py lists the modules the fast path must
# not import (typing, pathlib, dataclasses, socket, urllib, ...).

_FORMATS = ("human", "json", "jsonl")


# (--history, --wfile, --output-format); a plain tuple: a NamedTuple class
# costs a millisecond of start-up.
_Question = tuple[int | None, str | None, str]


def _parse(argv: list[str]) -> _Question | None:
    """The question, or None when ``argv`` is not one of the simple forms."""
    if not argv or argv[0] != "query":
        return None
    from shournal._paths import clean
    from shournal.data import INT64_MAX

    values: dict[str, str] = {}
    rest = argv[1:]
    while rest:
        flag, *rest = rest
        name, eq, value = flag.partition("=")
        if name not in ("--history", "--wfile", "--output-format") or name in values:
            return None
        if not eq:
            if not rest:
                return None
            value, *rest = rest
        if not value or value.startswith("-"):
            return None
        values[name] = value
    history = values.get("--history")
    wfile = values.get("--wfile")
    fmt = values.get("--output-format", "human")
    if history is None and wfile is None or fmt not in _FORMATS:
        return None
    if history is not None and not (
        history.isascii() and history.isdigit() and int(history) <= INT64_MAX
    ):
        return None
    # str(Path(F)), as the full CLI's typer option makes it: the name the
    # file is opened by and messages show
    return None if history is None else int(history), None if wfile is None else clean(wfile), fmt


def answer(argv: list[str]) -> int | None:
    """Answer ``shournal ARGV`` and return the exit status, or None (nothing
    done) when the full CLI must answer it."""
    question = _parse(argv)
    if question is None:
        return None
    history, wfile, output_format = question
    from shournal.cli._output import (
        HUMAN_MAX_FILES,
        STAT_COUNTS,
        no_results,
        note_pending,
        render,
        stat_counts,
        write,
    )
    from shournal.data import QueryError
    from shournal.errors import StoreError
    from shournal.journal import Journal
    from shournal.probe import check_file
    from shournal.query.pending import wait_for_pending

    human = output_format == "human"
    min_stats, max_stats = stat_counts(STAT_COUNTS)
    # The order of the full path: the file is checked first; the journal is
    # read (one transaction) only after waiting for commands still being
    # stored.  Opening it before only reads its schema version (or has the
    # store upgrade it), so that a journal that cannot be read is handed
    # over before anything is waited for.
    try:
        if wfile is not None:
            check_file(wfile)
        journal = Journal.open()
    except (QueryError, StoreError):
        return None
    with journal:
        pending = wait_for_pending()
        try:
            with journal.snapshot():
                commands = journal.find(
                    wfile=wfile, history=history, max_files=HUMAN_MAX_FILES if human else None
                )
                capped = None
                if not commands and human and wfile is not None:
                    capped = journal.capped_writers(wfile)
                stats = None
                if commands and human and max_stats > 0:
                    stats = journal.stats(command_ids=[c.id for c in commands])
        except (QueryError, StoreError, OSError):
            return None
    if human and not commands:
        write(no_results("", pending, wfile, None, capped))
    else:
        write(render(output_format, commands, stats, HUMAN_MAX_FILES, min_stats, max_stats, None))
    note_pending(pending, commands, human)
    return EXIT_FOUND if commands else EXIT_NOT_FOUND
