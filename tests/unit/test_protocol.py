"""native/shournal_protocol.h and shournal/capture/protocol.py must agree: compile
tests/native/protocol_layout.c against the header and compare every value,
and every struct member's offset, size and signedness."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from shournal import data, limits
from shournal.capture import protocol

NATIVE = Path(__file__).resolve().parents[2] / "native"
HEADER = NATIVE / "shournal_protocol.h"
PROGRAM = Path(__file__).resolve().parents[1] / "native" / "protocol_layout.c"
# Macros whose Python side is not shournal.capture.protocol.
ELSEWHERE = {"RETURN_VALUE_UNKNOWN": data} | {
    name: limits for name in dir(limits) if name.isupper()
}


def compiler_view(header_dir: Path, tmp_path: Path) -> list[list[str]]:
    exe = tmp_path / "protocol_layout"
    subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-I", str(header_dir), "-o", str(exe),
                    str(PROGRAM)], check=True)  # fmt: skip
    out = subprocess.check_output([str(exe)], text=True)
    return [line.split(" ") for line in out.splitlines()]


def disagreements(header: Path, lines: list[list[str]]) -> list[str]:
    """What the header (as compiled) and shournal.capture.protocol disagree on."""
    problems: list[str] = []
    text = header.read_text()
    macros = set(re.findall(r"^#define (SHOURNAL_\w+)", text, re.M)) - {"SHOURNAL_PROTOCOL_H"}
    structs = set(re.findall(r"^struct (shournal_\w+) \{", text, re.M))
    seen_macros: set[str] = set()
    sizes: dict[str, int] = {}
    members: dict[str, dict[str, tuple[int, int, bool]]] = {}
    for kind, *rest in lines:
        if kind in ("value", "string"):
            name, value = rest
            seen_macros.add(name)
            py_name = name.removeprefix("SHOURNAL_")
            module = ELSEWHERE.get(py_name, protocol)
            want: int | str = int(value) if kind == "value" else value
            if getattr(module, py_name, None) != want:
                problems.append(f"{name} is {want!r}, {module.__name__}.{py_name} is "
                                f"{getattr(module, py_name, None)!r}")  # fmt: skip
        elif kind == "sizeof":
            sizes[rest[0]] = int(rest[1])
        elif kind == "member":
            struct_name, field, offset, size, signed = rest
            members.setdefault(struct_name, {})[field] = (int(offset), int(size), signed == "1")
    problems += [f"{m} is not checked (tests/native/protocol_layout.c)"
                 for m in sorted(macros - seen_macros)]  # fmt: skip
    problems += [f"struct {s} is not checked" for s in sorted(structs - set(sizes))]
    layouts = {layout.c_name: layout for layout in protocol.LAYOUTS}
    problems += [f"struct {s} has no protocol.Layout" for s in sorted(structs - set(layouts))]
    for name, size in sizes.items():
        c_members = members.get(name, {})
        # the program lists every member: together they cover the struct
        end = 0
        for offset, msize, _signed in sorted(c_members.values()):
            if offset != end:
                problems.append(f"struct {name}: bytes {end}..{offset} not checked")
            end = offset + msize
        if end != size:
            problems.append(f"struct {name}: bytes {end}..{size} not checked")
        layout = layouts.get(name)
        if layout is None:
            continue
        if layout.size != size:
            problems.append(f"struct {name} is {size} bytes, protocol's {layout.size}")
        if layout.members() != c_members:
            problems.append(f"struct {name}: C {c_members} != Python {layout.members()}")
    return problems


def test_header_and_python_agree(tmp_path):
    assert disagreements(HEADER, compiler_view(NATIVE, tmp_path)) == []


@pytest.mark.parametrize(
    "old,new",
    [
        # two members of the same size swapped
        ("    uint32_t mode;\n    uint32_t uid;", "    uint32_t uid;\n    uint32_t mode;"),
        ("    int32_t holder_pid;   /* process pinning the namespace, for `exec` */\n"
         "    int32_t listener_pid;",
         "    int32_t listener_pid;\n    int32_t holder_pid;"),
        # a signedness change
        ("    int32_t pid;\n    uint16_t path_len;", "    uint32_t pid;\n    uint16_t path_len;"),
        # a limit changed on one side
        ("#define SHOURNAL_MAX_EXCLUDES 64", "#define SHOURNAL_MAX_EXCLUDES 65"),
        ('#define SHOURNAL_MARK_END "end"', '#define SHOURNAL_MARK_END "ended"'),
    ],
    ids=["swap-record-mode-uid", "swap-setup-done-pids", "record-pid-unsigned",
         "max-excludes", "mark-end"],  # fmt: skip
)
def test_a_changed_header_is_caught(tmp_path, old, new):
    """Positive control: a copy of the header with one change disagrees."""
    text = HEADER.read_text()
    assert old in text
    changed = tmp_path / "include"
    changed.mkdir()
    (changed / HEADER.name).write_text(text.replace(old, new, 1))
    assert disagreements(changed / HEADER.name, compiler_view(changed, tmp_path)) != []


def test_the_lost_counters_are_read_by_the_positions_of_their_fields():
    names = [name for name, _fmt in protocol.EVENTS.fields]
    assert names.index("lost") == protocol.EVENTS_LOST
    by_reason = names[protocol.EVENTS_LOST_BY_REASON :][: len(protocol.HOLDER_LOST_REASONS)]
    assert by_reason == [f"lost_{r}" for r in protocol.HOLDER_LOST_REASONS]


def test_long_command_text_travels_whole_and_a_too_long_one_is_marked():
    import socket

    for size, want_cut in ((100 * 1024, False), (protocol.MAX_COMMAND_TEXT + 10, True)):
        text = (b"abcdefghijklmnopqrstuvwxyz" * (size // 26 + 1))[:size]
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with a, b:
            sent = protocol.CommandMessage(7, 1, 2, bytes(16), text)
            protocol.send_command(a, sent)
            _data, got = protocol.recv_command(b)
        assert got is not None and got.return_value == 7
        if want_cut:
            mark = protocol.CUT_MARK.encode()
            assert got.text == text[: protocol.MAX_COMMAND_TEXT] + mark
        else:
            assert got.text == text
