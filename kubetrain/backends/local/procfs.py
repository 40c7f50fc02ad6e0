"""What /proc says about a process: its state and start time, which with the pid name one process for good
(a reused pid has a later start time). Linux; elsewhere only existence can be checked."""

from __future__ import annotations

import os


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) from /proc/<pid>/stat, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and ')': fields after the last
    # ")" are plain. fields[0] is field 3 (state); starttime is field 22.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[19])
    except (IndexError, ValueError):
        return None


def proc_start_time(pid: int) -> int | None:
    """The start time of `pid` (clock ticks since boot); None if it is gone or there is no /proc."""
    stat = proc_stat(pid)
    return None if stat is None else stat[1]


def pid_alive(pid: int, start_time: int | None) -> bool:
    """True when `pid` runs and is the process that had `start_time` (a reused pid is not).

    A zombie counts as dead: it has exited and only waits to be reaped. Without /proc only existence is checked.
    """
    if pid <= 0:
        return False
    stat = proc_stat(pid)
    if stat is None:
        if os.path.exists("/proc/self/stat"):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state, started = stat
    if state in ("Z", "X", "x"):
        return False
    return start_time is None or started == start_time
