"""The replicas table of the local job store: what the backend needs to act on each replica's process.

A replica's row follows its process (pid with start time, phase, exit, restarts); the status model
(`status.ReplicaStatus`) shows the same row without what only the backend may act on (`ReplicaRecord`).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contract.errors import JobNotFound
from ...status import ReplicaPhase
from .procfs import proc_start_time
from .store_connection import StoreConnection, check_role


@dataclass(frozen=True)
class ReplicaRecord:
    """What the backend needs to act on a replica's process; JobStatus deliberately hides it."""

    role: str
    index: int
    phase: ReplicaPhase
    pid: int | None
    pid_start_time: int | None
    log_path: Path | None


class _Unset(enum.Enum):
    UNSET = 0


_UNSET = _Unset.UNSET


class ReplicaRecords(StoreConnection):
    """The replicas table: one row per replica of a job, in plan order (``pos``)."""

    def update_replica(
        self,
        job_id: str,
        role: str,
        index: int,
        *,
        phase: ReplicaPhase | _Unset = _UNSET,
        pid: int | _Unset | None = _UNSET,
        pid_start_time: int | _Unset | None = _UNSET,
        host: str | _Unset | None = _UNSET,
        exit_code: int | _Unset | None = _UNSET,
        signal: int | _Unset | None = _UNSET,
        restarts: int | _Unset = _UNSET,
        started_at: float | _Unset | None = _UNSET,
        finished_at: float | _Unset | None = _UNSET,
        log_path: Path | str | _Unset | None = _UNSET,
        reason: str | _Unset | None = _UNSET,
        message: str | _Unset | None = _UNSET,
    ) -> None:
        """Set the given fields of one replica; fields not passed keep their value.

        Conveniences that keep the record coherent unless the field is passed explicitly:
        a ``pid`` brings its start time from /proc; entering Running from another phase
        (a start or restart) stamps ``started_at`` and clears ``finished_at``, ``exit_code``
        and ``signal`` of the previous attempt; entering Succeeded or Failed stamps ``finished_at``.
        """
        now = time.time()
        fields: dict[str, Any] = {
            name: value
            for name, value in (
                ("phase", phase),
                ("pid", pid),
                ("pid_start_time", pid_start_time),
                ("host", host),
                ("exit_code", exit_code),
                ("signal", signal),
                ("restarts", restarts),
                ("started_at", started_at),
                ("finished_at", finished_at),
                ("log_path", log_path),
                ("reason", reason),
                ("message", message),
            )
            if value is not _UNSET
        }
        if not isinstance(pid, _Unset) and isinstance(pid_start_time, _Unset):
            fields["pid_start_time"] = None if pid is None else proc_start_time(pid)
        if "log_path" in fields and fields["log_path"] is not None:
            fields["log_path"] = str(fields["log_path"])
        with self._tx(write=True) as conn:
            row = conn.execute(
                "SELECT phase FROM replicas WHERE job_id = ? AND role = ? AND idx = ?", (job_id, role, index)
            ).fetchone()
            if row is None:
                raise JobNotFound(f"no replica {role}-{index} in job {job_id!r}")
            current = ReplicaPhase(row[0])
            if isinstance(phase, ReplicaPhase) and phase != current:
                if phase is ReplicaPhase.RUNNING:
                    fields.setdefault("started_at", now)
                    for stale in ("finished_at", "exit_code", "signal"):
                        fields.setdefault(stale, None)
                elif phase.is_terminal:
                    fields.setdefault("finished_at", now)
            if "phase" in fields:
                fields["phase"] = str(fields["phase"])
            if not fields:
                return
            assignments = ", ".join(f"{name} = ?" for name in fields)
            conn.execute(
                f"UPDATE replicas SET {assignments} WHERE job_id = ? AND role = ? AND idx = ?",
                (*fields.values(), job_id, role, index),
            )

    def record_replica_restart(self, job_id: str, role: str, index: int) -> int:
        """Count one restart of a single replica; returns its new restart count."""
        key = (job_id, role, index)
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "UPDATE replicas SET restarts = restarts + 1 WHERE job_id = ? AND role = ? AND idx = ?", key
            )
            if cur.rowcount == 0:
                raise JobNotFound(f"no replica {role}-{index} in job {job_id!r}")
            return int(
                conn.execute("SELECT restarts FROM replicas WHERE job_id = ? AND role = ? AND idx = ?", key).fetchone()[
                    0
                ]
            )

    def add_replicas(self, job_id: str, replicas: Sequence[tuple[str, int]]) -> None:
        """Record more replicas of a running job (an elastic job scaled up), Pending, after the others;
        those it has already are left as they are."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFound(f"no job {job_id!r}")
            pos = int(conn.execute("SELECT COALESCE(MAX(pos), -1) FROM replicas WHERE job_id = ?",
                                   (job_id,)).fetchone()[0])
            for role, index in replicas:
                check_role(role)
                if conn.execute("SELECT 1 FROM replicas WHERE job_id = ? AND role = ? AND idx = ?",
                                (job_id, role, index)).fetchone() is not None:
                    continue
                pos += 1
                conn.execute(
                    "INSERT INTO replicas (job_id, role, idx, pos, phase, log_path) VALUES (?, ?, ?, ?, ?, ?)",
                    (job_id, role, index, pos, str(ReplicaPhase.PENDING), str(self.log_path(job_id, role, index))),
                )

    def remove_replicas(self, job_id: str, replicas: Sequence[tuple[str, int]]) -> None:
        """Forget replicas a running job no longer has (an elastic job scaled down; their logs stay)."""
        with self._tx(write=True) as conn:
            conn.executemany("DELETE FROM replicas WHERE job_id = ? AND role = ? AND idx = ?",
                             [(job_id, role, index) for role, index in replicas])

    def replica_records(self, job_id: str) -> list[ReplicaRecord]:
        """Pids, their start times and log files, in plan order: for signalling and reading logs."""
        with self._tx(write=False) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFound(f"no job {job_id!r}")
            rows = conn.execute(
                "SELECT role, idx, phase, pid, pid_start_time, log_path FROM replicas WHERE job_id = ? ORDER BY pos",
                (job_id,),
            ).fetchall()
        return [
            ReplicaRecord(role, idx, ReplicaPhase(phase), pid, start, None if lp is None else Path(lp))
            for role, idx, phase, pid, start, lp in rows
        ]
