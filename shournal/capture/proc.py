"""What /proc says of a process (proc(5)): enough to tell a live recorder
or shell from a later process that got its pid."""

from __future__ import annotations


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat after the command name: field 3 (the state) on;
    None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process started (field 22, clock ticks since boot)."""
    fields = stat_fields(pid)
    return None if fields is None or len(fields) <= 19 else int(fields[19])
