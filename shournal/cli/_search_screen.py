"""The screen of `shournal search`: a full-screen search as you type over
the journal's commands and the files they read and wrote, on
prompt_toolkit (docs/design.md says why that library).

It draws on ``/dev/tty`` and reads keys from it, so that the shell's key
binding can run it inside a command substitution: the chosen command is
the only thing written to stdout.

The matches come from :class:`shournal.store.search.Searcher` in windows
of command ids (newest first): a keystroke runs windows for at most
:data:`KEY_SECONDS`, draws what it found, and the rest of the page is
looked for between keystrokes (each window a separate event-loop callback,
so typing is never queued behind a scan).  The first of those callbacks
is queued only once the keystroke's screen is drawn: prompt_toolkit puts
off a redraw while callbacks are ready (up to its
``max_render_postpone_time``), so a search going on at once would delay
the very screen the key asked for.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import HSplit, Layout, VSplit, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.styles import Style

from shournal.cli._search_view import hit_fields, scope_for, status_line
from shournal.search_query import MODES, SCOPES, Details, Hit, Scope, parse_query
from shournal.terminal import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shournal.data import FileEventView
    from shournal.journal import Searcher

# How long a keystroke may look for matches before the screen is drawn;
# the rest comes between keystrokes.
KEY_SECONDS = 0.006
# Matches kept per search (more as the list is scrolled down).
PAGE = 200


_STYLE = Style.from_dict(
    {
        "status": "reverse",
        "selected": "reverse",
        "failed": "fg:ansired",
        "ok": "fg:ansigreen",
        "dim": "fg:ansibrightblack",
        "file-selected": "bold underline",
        "head": "bold",
    }
)


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def _one_line(text: str) -> str:
    return printable(" ".join(text.split("\n")))


class SearchScreen:
    """State and drawing of the search; :meth:`run` returns the chosen
    command line, or None when the user left without one."""

    def __init__(
        self,
        searcher: Searcher,
        *,
        query: str = "",
        mode: str = "substring",
        scope: str = "all",
        cwd: str | None = None,
        session: str | None = None,
        tty: str = "/dev/tty",
    ) -> None:
        self.searcher = searcher
        self.mode = mode
        self.scope_kind = scope
        self.cwd = os.getcwd() if cwd is None else cwd
        self.session = session
        self.tty = tty
        self.hits: list[Hit] = []
        self.position = 0  # where the search goes on (0: done)
        self.selected = 0
        self.top = 0
        self.generation = 0
        self.note = ""
        self.scope: Scope | None = None
        self.details: Details | None = None
        self.details_id: int | None = None
        self.file_index = 0
        self.statuses: dict[int, str] = {}  # file position -> --stat status
        self.panel: tuple[str, str] | None = None  # (title, text): lineage or stat
        self._journal: Any = None
        self.now = datetime.now(UTC)
        self.buffer = Buffer(multiline=False)
        self.buffer.text = query
        self.buffer.cursor_position = len(query)
        self.buffer.on_text_changed += lambda _: self.restart()
        self.app: Application[str | None] | None = None
        # the search to go on with once the screen is drawn (its generation)
        self._after_draw: int | None = None

    # -- searching ------------------------------------------------------------------

    def restart(self) -> None:
        """A new search for the typed text, mode and filter."""
        self.generation += 1
        self.hits = []
        self.selected = self.top = 0
        self.panel = None
        scope = scope_for(self.scope_kind, self.cwd, self.session)
        if isinstance(scope, str):
            self.scope, self.note, self.position = None, scope, 0
            return
        self.scope, self.note = scope, ""
        self.position = self.searcher.newest_id() + 1
        self._more(self.generation, KEY_SECONDS, keyed=True)

    def _wanted(self) -> int:
        return max(PAGE, self.selected + PAGE // 2)

    def _more(self, generation: int, seconds: float, *, keyed: bool = False) -> None:
        """Look for matches for ``seconds``; go on later if the page is not
        full (unless a newer search has started): after the screen is
        drawn when a key asked (``keyed``) or a redraw is due, else at once."""
        if generation != self.generation or self.position <= 0 or self.scope is None:
            return
        missing = self._wanted() - len(self.hits)
        if missing <= 0:
            return
        query = parse_query(self.buffer.text, self.mode)
        hits, self.position = self.searcher.search(
            query, self.scope, below=self.position, limit=missing, seconds=seconds
        )
        self._add(hits, ranked=bool(query.fuzzy))
        app = self.app
        running = app is not None and app.is_running and app.loop is not None
        if running and (hits or self.position <= 0):  # finding nothing changes nothing
            app.invalidate()  # type: ignore[union-attr]
        if self.position > 0 and len(self.hits) < self._wanted():
            if keyed or not running or app.invalidated:  # type: ignore[union-attr]
                self._after_draw = generation
            else:
                app.loop.call_soon(self._more, generation, KEY_SECONDS)  # type: ignore[union-attr]

    def _drawn(self, _app: object) -> None:
        """After a redraw: go on with the search a key left unfinished."""
        generation, self._after_draw = self._after_draw, None
        if generation is not None and self.app is not None and self.app.loop is not None:
            self.app.loop.call_soon(self._more, generation, KEY_SECONDS)

    def _add(self, hits: list[Hit], *, ranked: bool) -> None:
        """New matches into the list: after the others, or (``ranked``: a
        fuzzy search) in their place by score, the selected command
        staying selected once the user has moved."""
        if not ranked:
            self.hits += hits
            return
        chosen = self.hits[self.selected].id if self.hits and self.selected else None
        self.hits = sorted(self.hits + hits, key=lambda h: (-h.score, -h.id))
        if chosen is not None:
            self.selected = next(i for i, h in enumerate(self.hits) if h.id == chosen)

    def cycle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.restart()

    def cycle_scope(self) -> None:
        self.scope_kind = SCOPES[(SCOPES.index(self.scope_kind) + 1) % len(SCOPES)]
        self.restart()

    def move(self, delta: int) -> None:
        if not self.hits:
            return
        self.selected = max(0, min(len(self.hits) - 1, self.selected + delta))
        self.panel = None
        if self.position > 0 and len(self.hits) - self.selected < PAGE // 2:
            self._more(self.generation, KEY_SECONDS, keyed=True)

    # -- the selected command and file ------------------------------------------------

    def current(self) -> Details | None:
        if not self.hits:
            return None
        hit = self.hits[self.selected]
        if self.details_id != hit.id:
            self.details = self.searcher.details(hit.id)
            self.details_id = hit.id
            self.file_index = 0
            self.statuses = {}
        return self.details

    def files(self) -> list[tuple[str, FileEventView]]:
        d = self.current()
        if d is None:
            return []
        return [("w", ev) for ev in d.command.writes] + [("r", ev) for ev in d.command.reads]

    def next_file(self, delta: int) -> None:
        files = self.files()
        if files:
            self.file_index = (self.file_index + delta) % len(files)
            if self.panel is not None and self.panel[0].startswith("lineage"):
                self.panel = None

    def show_stat(self) -> None:
        """``--stat`` of the selected command's files: is each still what
        the command left?"""
        from shournal.query.filestat import STATUS_WORDS, file_status

        d = self.current()
        files = self.files()
        if d is None or not files:
            self.panel = ("--stat", "no files recorded for this command")
            return
        lines = []
        for i, (side, ev) in enumerate(files):
            status = file_status(ev, d.command.hash_chunk_size, d.command.hash_max_reads)
            self.statuses[i] = status
            mark = ">" if i == self.file_index else " "
            path = printable(os.fsdecode(ev.path))
            lines.append(f"{mark} {side} {status:<5} {STATUS_WORDS[status]:<10} {path}")
        self.panel = (f"--stat of #{d.command.id}", "\n".join(lines))

    def show_lineage(self) -> None:
        """The lineage of the selected file (a written file: the version
        this command wrote; a read file: its version on disk)."""
        files = self.files()
        d = self.current()
        if d is None or not files:
            self.panel = ("lineage", "no files recorded for this command")
            return
        side, ev = files[self.file_index]
        path = os.fsdecode(ev.path)
        from shournal.data import QueryError
        from shournal.errors import StoreError
        from shournal.provenance.graph import CommandTarget, DiskTarget, build_lineage
        from shournal.provenance.readers import JournalReader
        from shournal.provenance.render import render_human

        try:
            if self._journal is None:
                from shournal.journal import Journal

                self._journal = Journal.open(read_only=True)
            target = CommandTarget(path, d.command.id) if side == "w" else DiskTarget(path)
            text = render_human(build_lineage(JournalReader(self._journal), [target]))
        except (QueryError, StoreError, OSError) as e:
            text = f"no lineage: {e}"
        self.panel = (f"lineage of {printable(path)}", text)

    # -- drawing --------------------------------------------------------------------

    def _rows(self) -> int:
        app = self.app
        height = app.output.get_size().rows if app is not None else 24
        return max(1, height - 3)

    def list_text(self) -> list[tuple[str, str]]:
        rows = self._rows()
        if self.selected < self.top:
            self.top = self.selected
        elif self.selected >= self.top + rows:
            self.top = self.selected - rows + 1
        out: list[tuple[str, str]] = []
        for i in range(self.top, min(len(self.hits), self.top + rows)):
            hit = self.hits[i]
            when, status, text = hit_fields(hit, self.now)
            status_style = "class:ok" if hit.return_value == 0 else "class:failed"
            line_style = "class:selected" if i == self.selected else ""
            out.append((line_style, when))
            out.append((f"{line_style} {status_style}", status))
            out.append((line_style, text))
            out.append(("", "\n"))
        if not self.hits:
            out.append(("class:dim", self.note or ("searching..." if self.position else
                                                    "no matching command")))
        return out

    def status_text(self) -> list[tuple[str, str]]:
        line = status_line(len(self.hits), self.position > 0, self.mode, self.scope_kind)
        return [("class:status", line)]

    def details_text(self) -> Any:
        if self.panel is not None:
            title, text = self.panel
            return [("class:head", title + "\n"), ("", printable(text, newlines=True))]
        d = self.current()
        if d is None:
            return [("class:dim", "")]
        c = d.command
        out: list[tuple[str, str]] = []
        status_style = "class:ok" if c.return_value == 0 else "class:failed"
        out.append(("class:head", f"#{c.id} "))
        out.append((status_style, f"exit {c.return_value}"))
        out.append(("", f"  {printable(c.username)}@{printable(c.hostname)}\n"))
        took = (c.end_time - c.start_time).total_seconds()
        out.append(("", f"{c.start_time.astimezone():%Y-%m-%d %H:%M:%S} -> "
                        f"{c.end_time.astimezone():%H:%M:%S} ({took:.2f}s)\n"))  # fmt: skip
        out.append(("class:dim", f"in {printable(_home(c.working_dir))}\n"))
        out.append(("", printable(c.text, newlines=True) + "\n\n"))
        index = 0
        for side, events, total in (("wrote", c.writes, c.write_count),
                                    ("read", c.reads, c.read_count)):  # fmt: skip
            out.append(("class:head", f"{side} ({total}):\n"))
            for ev in events:
                style = "class:file-selected" if index == self.file_index else ""
                mark = ">" if index == self.file_index else " "
                status = self.statuses.get(index, " ")
                out.append((style, f"{mark}{status} {printable(os.fsdecode(ev.path))}\n"))
                index += 1
            if total > len(events):
                out.append(("class:dim", f"  ... {total - len(events)} more\n"))
        out.append(("class:head", "\nsession:\n"))
        for cid, text in d.before:
            out.append(("class:dim", f"  #{cid} {_one_line(text)}\n"))
        out.append(("class:head", f"> #{c.id} {_one_line(c.text)}\n"))
        for cid, text in d.after:
            out.append(("class:dim", f"  #{cid} {_one_line(text)}\n"))
        return out

    # -- the application ------------------------------------------------------------

    def _keys(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("enter")
        def _accept(event: Any) -> None:
            if self.hits:
                event.app.exit(result=self.hits[self.selected].text)

        @kb.add("escape", eager=True)
        def _escape(event: Any) -> None:
            if self.panel is not None:
                self.panel = None
            else:
                event.app.exit(result=None)

        @kb.add("c-c")
        @kb.add("c-g")
        def _cancel(event: Any) -> None:
            event.app.exit(result=None)

        @kb.add("up")
        @kb.add("c-p")
        def _up(event: Any) -> None:
            self.move(-1)

        @kb.add("down")
        @kb.add("c-n")
        def _down(event: Any) -> None:
            self.move(1)

        @kb.add("pageup")
        def _page_up(event: Any) -> None:
            self.move(-self._rows())

        @kb.add("pagedown")
        def _page_down(event: Any) -> None:
            self.move(self._rows())

        @kb.add("c-r")
        def _scope(event: Any) -> None:
            self.cycle_scope()

        @kb.add("c-s")
        def _mode(event: Any) -> None:
            self.cycle_mode()

        @kb.add("tab")
        def _next_file(event: Any) -> None:
            self.next_file(1)

        @kb.add("s-tab")
        def _previous_file(event: Any) -> None:
            self.next_file(-1)

        @kb.add("c-o")
        def _lineage(event: Any) -> None:
            self.show_lineage()

        @kb.add("c-t")
        def _stat(event: Any) -> None:
            self.show_stat()

        return kb

    def build(self, **io: Any) -> Application[str | None]:
        """The application (``io``: input/output for tests)."""
        prompt = Window(
            BufferControl(self.buffer), height=1, dont_extend_height=True
        )
        body = VSplit(
            [
                Window(FormattedTextControl(self.list_text), wrap_lines=False),
                Window(width=1, char="│", style="class:dim"),
                Window(FormattedTextControl(self.details_text), wrap_lines=True),
            ]
        )
        root = HSplit(
            [
                VSplit([Window(FormattedTextControl("search> "), width=8), prompt], height=1),
                Window(FormattedTextControl(self.status_text), height=1),
                body,
            ]
        )
        app: Application[str | None] = Application(
            layout=Layout(root, focused_element=prompt),
            key_bindings=self._keys(),
            full_screen=True,
            style=_STYLE,
            **io,
        )
        # Esc must cancel at once, not wait for a possible Alt sequence.
        app.ttimeoutlen = 0.05
        app.after_render += self._drawn
        self.app = app
        return app

    def run(self) -> str | None:
        """Show the screen on the terminal until Enter (the command line)
        or Esc/Ctrl-C (None)."""
        from prompt_toolkit.input.vt100 import Vt100Input
        from prompt_toolkit.output.vt100 import Vt100_Output

        with open(self.tty, encoding="utf-8", errors="replace") as tty_in, open(
            self.tty, "w", encoding="utf-8", errors="replace"
        ) as tty_out:
            app = self.build(
                input=Vt100Input(tty_in),
                output=Vt100_Output.from_pty(tty_out, term=os.environ.get("TERM")),
            )
            # an error in a key handler ends the search as the CLI reports
            # errors (one line), not as a traceback on the screen and stdout
            return app.run(pre_run=self.restart, set_exception_handler=False)
