"""The job's orphans, found without their environment: the supervisor as their reaper.

A replica's descendant that double-forks, calls ``setsid()`` and rebuilds its environment from nothing
(``env -i``, ``execve(..., {})``) leaves the replica's process group and session and carries no
``KUBETRAIN_LOCAL_TAG`` (`_watchdog`), so neither a group kill nor a tag sweep finds it. What still holds it is
parentage: with ``PR_SET_CHILD_SUBREAPER`` set on the supervisor, an orphaned descendant is reparented to the
supervisor rather than to init, and so stays a child of it. When the job has ended and its process group is
closed (its replicas, watchdog and preload server gone), every child the supervisor still has is such an
orphan: `sweep` kills and reaps them.

Only in a process kubetrain owns (`contract.ownership`: the `kubetrain` command, a detached supervisor): in a
user's program that runs a job through the library, the user's own orphans would be adopted and swept too.
There, as before, a daemon that clears its environment outlives the job. A cgroup would find it as well, but
needs a delegated cgroup v2 subtree that an ordinary user seldom has; this needs nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
"""prctl(2) option: orphaned descendants are reparented to this process (Linux 3.4+)."""

SWEEP_ROUNDS = 20
"""Rounds of kill-and-reap at most: killing an adopted process may orphan its own children, adopted next."""

REAP_WAIT = 5.0
"""Seconds to wait for killed orphans to exit (one stuck in the kernel is left, not waited for forever)."""


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; whether the kernel agreed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children() -> list[int]:
    """The pids whose parent is this process (live or zombie): from /proc's stat of every process, since
    /proc/<pid>/task/<tid>/children needs a kernel option not every kernel has."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        # Fields after the command (which may hold spaces and parentheses): state, ppid, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def sweep(spare: frozenset[int] = frozenset()) -> list[int]:
    """SIGKILL and reap every child this process still has but those in `spare` (the children it had before
    the job started), round after round until none is left: the orphans the job left. Call only once the
    job's own processes are gone. The pids swept."""
    swept: list[int] = []
    for _ in range(SWEEP_ROUNDS):
        left = [pid for pid in children() if pid not in spare]
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap(left)
        swept += left
    return swept


def _reap(pids: list[int]) -> None:
    deadline = time.monotonic() + REAP_WAIT
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped already, or not ours after all
                done = pid
            if done:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)


__all__ = ["become_subreaper", "children", "sweep"]
