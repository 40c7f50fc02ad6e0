"""A job's processes reached without its supervisor: by their recorded pids and their environment tag.

Normally a job's supervisor stops its replicas. When it cannot (it died, it is stopped with SIGSTOP, the
job is deleted under it), the backend does it from another process. A pid alone does not identify a process
for long (pids are reused), so a process is signalled only while its recorded start time still matches
(`kill_recorded`), and the descendants that left a replica's process group are found by the tag every
process kubetrain starts carries in its environment (`procfs.processes_with_env`).
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

from ...contract import env_names
from .procfs import pid_alive, proc_start_time, processes_with_env

if TYPE_CHECKING:
    from .store import JobStore

KILL_WAIT = 5.0
"""Seconds to wait for SIGKILLed processes to be gone (longer only for one stuck in the kernel)."""


def kill_recorded(pid: int, start_time: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to the process group of a replica leader recorded as ``(pid, start_time)``.

    Returns False, touching nothing, when that process is gone or the pid now
    belongs to another process. Descendants that left the group, or outlived
    a dead leader, are reached by `_watchdog.kill_tagged` with the group's token.
    """
    if pid <= 1:
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        # Opened before the check: while the pidfd's process lives, its pid
        # (and so its group id) cannot be given to another process.
        if proc_start_time(pid) != start_time:
            return False
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            # No longer a group leader (it called setpgid): signal the process itself.
            try:
                signal.pidfd_send_signal(pidfd, sig)
            except ProcessLookupError:
                return False
        return True
    finally:
        os.close(pidfd)


def job_processes(store: JobStore, job_id: str) -> dict[int, int]:
    """pid → start time of every live process of the job's replicas: the recorded replica leaders, and
    every process kubetrain started whose environment names the job (descendants that left the group)."""
    found = {
        r.pid: r.pid_start_time
        for r in store.replica_records(job_id)
        if r.pid and r.pid_start_time and pid_alive(r.pid, r.pid_start_time)
    }
    found.update(processes_with_env([f"{env_names.JOB}={job_id}"], [env_names.LOCAL_TAG]))
    return found


def kill_job_processes(store: JobStore, job_id: str, grace: float = 0.0) -> list[int]:
    """Stop the job's processes without their supervisor: SIGTERM, up to `grace` seconds, SIGKILL, then
    wait for them to be gone (`KILL_WAIT`). The pids still alive after that (stuck in the kernel)."""
    targets = job_processes(store, job_id)
    if grace > 0 and targets:
        for pid, start in targets.items():
            kill_recorded(pid, start, signal.SIGTERM)
        _wait_gone(targets, grace)
    for _ in range(3):  # again: a process forked while the others were being killed
        live = job_processes(store, job_id)
        if not live:
            return []
        for pid, start in live.items():
            kill_recorded(pid, start, signal.SIGKILL)
        targets.update(live)
        _wait_gone(live, KILL_WAIT)
    return sorted(p for p, s in targets.items() if pid_alive(p, s))


def _wait_gone(processes: dict[int, int], timeout: float) -> None:
    """Until none of `processes` (pid → start time) is alive, at most `timeout` seconds. A killed child of a
    stopped supervisor stays a zombie, which counts as gone."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while any(pid_alive(p, s) for p, s in processes.items()) and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
