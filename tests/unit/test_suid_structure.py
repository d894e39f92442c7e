"""The setuid helper funnels privilege through one place per subcommand:
`privileged_setup`, `privileged_join` and `privileged_probe` decide while
privileged and never drop; each `cmd_*` drops exactly once and acts only
after it (docs/security.md, "How privilege flows").  Read from the source,
as a reviewer would check it."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "native" / "shournal_suid.c"


def _functions(text: str) -> dict[str, str]:
    """Top-level C function bodies by name (brace matching; the helper's
    style puts the opening brace of a function on its own line)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"^(?:static )?[\w ]+?\**(\w+)\([^;{]*\)\n\{", text, re.M):
        depth, i = 0, m.end() - 1
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out[m.group(1)] = text[i : j + 1]
                break
    return out


def _drops(body: str) -> int:
    return len(re.findall(r"\bdrop_privileges\(\)", body))


def test_each_subcommand_drops_once_after_deciding() -> None:
    funcs = _functions(SRC.read_text())
    for cmd, decide in (("cmd_setup", "privileged_setup"), ("cmd_exec", "privileged_join"),
                        ("cmd_check", "privileged_probe")):
        body = funcs[cmd]
        assert _drops(body) == 1, cmd
        assert body.index(f"{decide}(") < body.index("drop_privileges()"), cmd
        assert _drops(funcs[decide]) == 0, decide


def test_the_rule_sees_a_second_drop() -> None:
    """Positive control: a body with two drops is counted as two."""
    body = "{\n    if (drop_privileges() != 0)\n        x();\n    (void)drop_privileges();\n}"
    assert _drops(body) == 2
    funcs = _functions("static int cmd_x(void)\n" + body + "\n")
    assert _drops(funcs["cmd_x"]) == 2
