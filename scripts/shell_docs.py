"""Build-time files made from the command tree: shell completion and man pages.

    python scripts/shell_docs.py OUTDIR

writes, under OUTDIR (the layout of a share/ directory):

    bash-completion/completions/shournal   (bash-completion loads it on the first TAB)
    zsh/vendor-completions/_shournal       (compinit autoloads it from $fpath)
    man/man1/shournal.1, shournal-query.1, shournal-describe-tool.1, ...

Both completion files only ask `shournal` itself at each TAB (typer's
completion protocol, `_SHOURNAL_COMPLETE`): nothing runs when a shell
starts, and the candidates always match the installed commands.  The man
pages are the `--help` texts in roff, one per command and sub-command,
made by `make install` and the Debian package with the interpreter of the
installed venv.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from pathlib import Path

PROG = "shournal"
COMPLETE_VAR = "_SHOURNAL_COMPLETE"

# zsh asks the same protocol as bash (typer's own zsh answer is an
# `_arguments` spec that never offers options) and adds the candidates;
# nothing offered: file names.  As an autoloaded function (the file in
# $fpath) the body runs at every TAB and must complete right away; sourced
# it only registers the function.
_ZSH = """\
#compdef {prog}

{func}() {{
    local -a reply
    reply=("${{(@f)$(env COMP_WORDS="${{words[1,$CURRENT]}}" COMP_CWORD=$((CURRENT - 1)) \\
        {var}=complete_bash {prog} 2>/dev/null)}}")
    if [[ -n ${{reply[1]}} ]]; then
        compadd -- "${{reply[@]}}"
    else
        _files
    fi
}}

if [[ $zsh_eval_context[-1] == file ]]; then
    compdef {func} {prog}
else
    {func} "$@"
fi
"""


def _command() -> object:
    from typer.main import get_command

    from shournal.cli._app import app

    return get_command(app)


def completion_scripts() -> dict[str, str]:
    """Relative path -> text of the bash and zsh completion files."""
    from typer._completion_classes import BashComplete

    bash = BashComplete(_command(), {}, PROG, COMPLETE_VAR)  # type: ignore[arg-type]
    # BashComplete.source() also checks the bash version of the build host
    # and says so on stderr; the template alone is what is installed.
    bash_text = (bash.source_template % bash.source_vars()).replace("$'\n'", "$'\\n'")
    zsh_text = _ZSH.format(prog=PROG, func=bash.func_name, var=COMPLETE_VAR)
    return {
        "bash-completion/completions/shournal": bash_text.strip() + "\n",
        "zsh/vendor-completions/_shournal": zsh_text.strip() + "\n",
    }


# -- man pages ----------------------------------------------------------------------


def _roff(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped, no line
    starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line if line[:1] in (".", "'") else line)
                     for line in text.splitlines())  # fmt: skip


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def _walk(
    cmd: object, path: list[str], parent: object = None
) -> list[tuple[list[str], object, object]]:
    """(name path, command, its context) of `cmd` and every visible
    sub-command; a context as invoking the command makes it (-h from the
    application's settings, inherited)."""
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent,  # type: ignore[attr-defined]
                            **(getattr(cmd, "context_settings", None) or {}))  # fmt: skip
    out = [(path, cmd, ctx)]
    subs = getattr(cmd, "commands", None) or {}
    for name in sorted(subs):
        sub = subs[name]
        if not getattr(sub, "hidden", False):
            out += _walk(sub, [*path, name], ctx)
    return out


def _exit_statuses() -> list[str]:
    """The exit status table of shournal.cli's docstring, its one place."""
    import shournal.cli

    doc = (shournal.cli.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(doc) if line.startswith("Exit statuses"))
    lines = []
    for line in doc[start + 1:]:
        if not line.strip():
            break
        lines.append(line.strip())
    return lines


def man_page(path: list[str], cmd: object, ctx: object, version: str, date: str,
             all_pages: list[list[str]]) -> str:  # fmt: skip
    name = "-".join(path)
    # the one line `shournal --help` lists it with
    short = cmd.get_short_help_str(limit=100).removeprefix(f"{name}: ") or name  # type: ignore[attr-defined]
    out = [
        f'.TH {name.upper()} 1 "{date}" "shournal {version}" "User Commands"',
        ".SH NAME",
        f"{_roff(name)} \\- {_roff(short)}",
        ".SH SYNOPSIS",
        f".B {_roff(' '.join(path))}",
        _roff(" ".join(cmd.collect_usage_pieces(ctx))),  # type: ignore[attr-defined]
        ".SH DESCRIPTION",
    ]
    for i, para in enumerate(_paragraphs(getattr(cmd, "help", None) or short)):
        out += ([".PP"] if i else []) + [_roff(para)]
    if len(path) == 1:
        out += [".PP", _roff("Recording a shell: `shournal init bash` (or zsh) prints the two "
                             "lines to put at the top of the shell's rc file."),
                ".PP", _roff("Every command has --help (-h) and a man page of its own.")]
    args = [p for p in cmd.get_params(ctx) if p.param_type_name == "argument"]  # type: ignore[attr-defined]
    opts = [p.get_help_record(ctx) for p in cmd.get_params(ctx)  # type: ignore[attr-defined]
            if p.param_type_name == "option"]  # fmt: skip
    if args:
        out.append(".SH ARGUMENTS")
        for a in args:
            rec = a.get_help_record(ctx) if hasattr(a, "get_help_record") else None
            out += [".TP", f".I {_roff(a.human_readable_name)}"]
            help_text = (rec[1] if rec else "") or getattr(a, "help", "") or ""
            out.append(_roff(" ".join(help_text.split())) or "\\&")
    if any(opts):
        out.append(".SH OPTIONS")
        for rec in opts:
            if rec is None:
                continue
            out += [".TP", f".B {_roff(rec[0])}", _roff(" ".join(rec[1].split())) or "\\&"]
    subs = getattr(cmd, "commands", None) or {}
    if subs:
        out.append(".SH COMMANDS")
        for sub_name in sorted(subs):
            sub = subs[sub_name]
            if getattr(sub, "hidden", False):
                continue
            text = sub.get_short_help_str(limit=200)
            out += [".TP", f".B {_roff(sub_name)}",
                    f"{_roff(text)} See \\fB{_roff('-'.join([*path, sub_name]))}\\fR(1)."]
    if len(path) == 1:
        out.append(".SH EXIT STATUS")
        out += [".nf", *(_roff(line) for line in _exit_statuses()), ".fi"]
        out += [".SH FILES", ".TP", ".I $XDG_CONFIG_HOME/shournal/config.toml",
                _roff("Configuration, created with commented defaults on first use."),
                ".TP", ".I $XDG_DATA_HOME/shournal/journal.sqlite",
                _roff("The journal; SHOURNAL_DB_URL selects another SQLAlchemy URL, e.g. a "
                      "PostgreSQL database.")]  # fmt: skip
    see = [p for p in all_pages if p != path and (len(p) == 1 or p[:-1] == path or p == path[:-1])]
    if see:
        out += [".SH SEE ALSO",
                ",\n".join(f".BR {_roff('-'.join(p))} (1)" for p in see)]
    return "\n".join(out) + "\n"


def man_pages(date: str | None = None) -> dict[str, str]:
    """Relative path -> text of one man page per command and sub-command."""
    from shournal import __version__

    if date is None:
        # reproducible builds: the source date when the build gives one
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        moment = (datetime.datetime.fromtimestamp(int(epoch), datetime.UTC) if epoch
                  else datetime.datetime.now(datetime.UTC))  # fmt: skip
        date = moment.strftime("%Y-%m-%d")
    tree = _walk(_command(), [PROG])
    names = [p for p, _, _ in tree]
    return {f"man/man1/{'-'.join(p)}.1": man_page(p, c, ctx, __version__, date, names)
            for p, c, ctx in tree}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir", type=Path)
    args = p.parse_args(argv)
    for rel, text in {**completion_scripts(), **man_pages()}.items():
        dest = args.outdir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
