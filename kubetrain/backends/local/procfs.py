"""What /proc says about a process: its state and start time, which with the pid name one process for good
(a reused pid has a later start time). Linux; elsewhere only existence can be checked."""

from __future__ import annotations

import os
from collections.abc import Sequence


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


def proc_state(pid: int, start_time: int | None = None) -> str | None:
    """The one-letter state of `pid` (R, S, D, T for stopped by a signal, t for stopped by a tracer, Z);
    None when it is gone or is no longer the process that had `start_time`."""
    stat = proc_stat(pid)
    if stat is None or (start_time is not None and stat[1] != start_time):
        return None
    return stat[0]


def is_stopped(pid: int, start_time: int | None = None) -> bool:
    """True when `pid` is stopped (`kill -STOP`, Ctrl-Z, a tracer): it runs no code until it is continued."""
    return proc_state(pid, start_time) in ("T", "t")


def proc_cmdline(pid: int) -> list[str]:
    """The argv of `pid` as /proc shows it; [] when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in data.split(b"\0") if part]


def processes_with_env(entries: Sequence[str], names: Sequence[str] = ()) -> list[tuple[int, int]]:
    """(pid, start time) of every live process whose environment holds every `NAME=value` of `entries` and
    a variable of each of `names` (any value).

    How processes that left every process group (a daemon's `setsid()`, torchrun's workers) are still
    found: they keep the environment they inherited. A process that rebuilt its environment, or is not
    ours to read, is not found.
    """
    wanted = [e.encode() for e in entries]
    prefixes = [f"{n}=".encode() for n in names]
    me = os.getpid()
    found = []
    try:
        listed = os.listdir("/proc")
    except OSError:
        return []
    for name in listed:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if not all(w in environ for w in wanted):
            continue
        variables = environ.split(b"\0")
        if not all(w in variables for w in wanted):
            continue
        if not all(any(v.startswith(p) for v in variables) for p in prefixes):
            continue
        stat = proc_stat(pid)
        if stat is not None and stat[0] not in ("Z", "X", "x"):
            found.append((pid, stat[1]))
    return found
