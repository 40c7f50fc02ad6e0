"""A local job's supervisor state file: who supervises the job, whether a signal reaches it, and its heartbeat.

A job's supervisor is found from another process (`kubetrain cancel`, `status`, `delete`) by its record in
the store, but the store cannot say how to reach it or whether it is still alive: a pid is reused, a
process in a thread of someone's program must not get a SIGTERM, and a supervisor killed by SIGKILL or a
reboot leaves no word. So the supervisor (and, until one takes over, the process that created the job)
keeps this small file in the job's log folder, and touches it every `HEARTBEAT` seconds: its time is the
last sign of life, when the job ended if nobody was left to say so (`supervisor_liveness`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .procfs import pid_alive, proc_start_time

if TYPE_CHECKING:
    from .store import JobStore

HEARTBEAT = 1.0
"""Seconds between the supervisor's heartbeats (its state file touched): when it dies, however it dies, the
job's Finished time is its last heartbeat, not the time someone next looked."""
STATE_FILE = "supervisor.json"
"""The supervisor's state file, in the job's log folder: who supervises the job and how to reach it."""
STATE_SIZE = 512
"""Bytes the state file is padded to (JSON allows trailing blanks): on a full disk, a state that cannot be
written as a new file is written over the old one, in blocks it already has (`write_state`)."""
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class SupervisorState:
    """What a job's state file says (`STATE_FILE`): written by the process that created the job (until a
    supervisor takes over), then by its supervisor, whose heartbeat keeps the file's time fresh."""

    pid: int
    start_time: int | None
    supervising: bool
    """False: the process that created the job, which has not started it yet."""
    signals: bool
    """A SIGTERM wakes it to read a request; False: it polls the store (it runs in a thread of a program
    whose signals are the program's: a SIGTERM would end the program)."""
    detached: bool
    """A supervisor process of its own (`run --detach`, `resume`): nobody else's program, so it may be killed."""
    heartbeat: float
    """The file's modification time: the last sign of life."""

    def alive(self) -> bool:
        return pid_alive(self.pid, self.start_time)


def state_path(store: JobStore, job_id: str) -> Path:
    return store.log_dir(job_id) / STATE_FILE


def write_state(path: Path, pid: int, *, supervising: bool, signals: bool, detached: bool) -> bool:
    """Write the state file whole (a new file renamed over the old: a reader never sees half of it). True
    when written. Best effort: a folder gone must not stop a job, which then only lacks what the file tells.

    On a full disk (ENOSPC, EDQUOT) the new file finds no block; the state is then written over the old
    file, whose blocks it reuses (it is padded to `STATE_SIZE`), since a stale state misleads: a creator's
    says "no signals", and a cancel would then wait for a supervisor that waits for a signal.
    """
    data = {
        "pid": pid,
        "startTime": proc_start_time(pid),
        "supervising": supervising,
        "signals": signals,
        "detached": detached,
    }
    text = json.dumps(data).encode().ljust(STATE_SIZE - 1) + b"\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            _write_at(fd, text)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # an empty file left on a full disk takes what little room is left
        return exc.errno in _NO_ROOM and _write_over(path, text)


def _write_at(fd: int, data: bytes, offset: int = 0) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _write_over(path: Path, text: bytes) -> bool:
    """Write `text` over the file at `path`, in its own blocks (no new one needed), if it is as large. A
    reader may, rarely, see a mix of old and new: it finds no valid JSON and treats it as no file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size < len(text):
            return False  # written by an earlier kubetrain, unpadded
        _write_at(fd, text)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_state(path: Path) -> SupervisorState | None:
    """The state file, or None when there is none (a job of an earlier kubetrain) or it cannot be read."""
    try:
        with open(path) as f:
            data = json.load(f)
            heartbeat = os.fstat(f.fileno()).st_mtime
        return SupervisorState(
            pid=int(data["pid"]),
            start_time=None if data.get("startTime") is None else int(data["startTime"]),
            supervising=bool(data.get("supervising", True)),
            signals=bool(data.get("signals", True)),
            detached=bool(data.get("detached", False)),
            heartbeat=heartbeat,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Heartbeat:
    """Writes the state file (`write`), then touches it every `HEARTBEAT` seconds from a thread of its own:
    the file's time says when the supervisor was last alive, whatever its control loop is doing (starting
    replicas, a grace period). A state not written (no room on the disk, or the file removed) is written
    again at each beat until it is: a full disk delays the file, it never stops the beat or the job."""

    def __init__(self, path: Path, write: Callable[[], bool]) -> None:
        self._path = path
        self._write = write
        self._written = write()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kubetrain-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            if not self._written:
                self._written = self._write()
                continue
            try:
                os.utime(self._path)
            except FileNotFoundError:
                self._written = self._write()
            except OSError:
                pass  # touching needs no room; anything else (a read-only remount) only costs this beat

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
