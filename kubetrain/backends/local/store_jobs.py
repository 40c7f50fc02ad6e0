"""The jobs table of the local job store: a job's record, phase, supervisor, conditions and lifetime.

A job id is its name with five random characters (kubectl's generateName alphabet), so the same id can name
Kubernetes objects and anything shorter than it that is unambiguous names the job (`resolve_id`). A
supervisor is recorded with its start time, so a reused pid is never taken for it (`procfs.pid_alive`).
The job's phase moves in one transaction with its condition, and the first ending wins (`set_job_phase`).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Collection, Sequence
from typing import Any

from ...contract.errors import JobNotFound
from ...status import Condition, ConditionStatus, ConditionType, FailureSummary, JobPhase, ReplicaPhase
from .procfs import pid_alive, proc_start_time
from .store_connection import StoreConnection, StoreError, check_role

# kubectl's generateName alphabet: no vowels (no accidental words), no 0/1/3 (no o/l/e look-alikes).
_ID_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_ID_SUFFIX_LEN = 5
# A job id is a DNS-1123 label (63 chars), so the same id can name Kubernetes objects.
_ID_BASE_MAX = 63 - 1 - _ID_SUFFIX_LEN


class JobIdTaken(StoreError):
    """The id a job was to be recorded under is another job's (drawn the same meanwhile: draw again)."""


class AmbiguousJobIdError(StoreError, LookupError):
    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


def _id_base(name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    base = re.sub(r"-{2,}", "-", base).strip("-")
    return base[:_ID_BASE_MAX].rstrip("-") or "job"


def new_job_id(name: str) -> str:
    """A fresh id for a job named `name`: ``<name>-<5 random chars>`` (`JobRecords.create_job` checks it is free)."""
    # os.urandom rather than the secrets module: that one pulls in hashlib and random, a few
    # milliseconds on every CLI start. Bytes past the last multiple of the alphabet size are
    # skipped so each character stays uniformly likely.
    usable = 256 - 256 % len(_ID_ALPHABET)
    chars: list[str] = []
    while len(chars) < _ID_SUFFIX_LEN:
        chars += [_ID_ALPHABET[b % len(_ID_ALPHABET)] for b in os.urandom(8) if b < usable]
    return f"{_id_base(name)}-{''.join(chars[:_ID_SUFFIX_LEN])}"


def _check_json(label: str, text: str) -> None:
    try:
        json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{label} is not valid JSON: {exc}") from None



class JobRecords(StoreConnection):
    """The jobs table (with its conditions): one row per job, whatever runs it."""

    def create_job(
        self,
        name: str,
        backend: str,
        spec_json: str,
        plan_json: str | None,
        replicas: Sequence[tuple[str, int]],
        backoff_limit: int | None = None,
        phase: JobPhase = JobPhase.PENDING,
        namespace: str | None = None,
        ttl_seconds_after_finished: int | None = None,
        job_id: str | None = None,
    ) -> str:
        """Record a new job and its replicas (in plan order); returns its id, ``<name>-<5 chars>``.

        Also creates the job's log directory and a ``Created`` condition. ``ttl_seconds_after_finished``:
        the job is one of :meth:`expired_jobs` that long after it finished. ``job_id``: the id, drawn
        beforehand (`new_job_id`) because the job's launch record names it; `JobIdTaken` if a job has it.
        """
        _check_json("spec_json", spec_json)
        if plan_json is not None:
            _check_json("plan_json", plan_json)
        seen: set[tuple[str, int]] = set()
        for role, index in replicas:
            check_role(role)
            if (role, index) in seen:
                raise ValueError(f"replica {role}-{index} listed twice")
            seen.add((role, index))
        now = time.time()
        for _ in range(20):
            drawn = job_id is None
            job_id = new_job_id(name) if job_id is None else job_id
            try:
                with self._tx(write=True) as conn:
                    conn.execute(
                        "INSERT INTO jobs (id, name, backend, namespace, phase, spec_json, plan_json,"
                        " backoff_limit, created_at, started_at, ttl_seconds_after_finished)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            job_id,
                            name,
                            backend,
                            namespace,
                            str(phase),
                            spec_json,
                            plan_json,
                            backoff_limit,
                            now,
                            now if phase is JobPhase.RUNNING else None,
                            ttl_seconds_after_finished,
                        ),
                    )
                    conn.executemany(
                        "INSERT INTO replicas (job_id, role, idx, pos, phase, log_path) VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            (
                                job_id,
                                role,
                                index,
                                pos,
                                str(ReplicaPhase.PENDING),
                                str(self.log_path(job_id, role, index)),
                            )
                            for pos, (role, index) in enumerate(replicas)
                        ],
                    )
                    self._insert_condition(
                        conn,
                        job_id,
                        Condition(ConditionType.CREATED, ConditionStatus.TRUE, "JobCreated", None, now),
                    )
            except sqlite3.IntegrityError:
                if not drawn:
                    raise JobIdTaken(f"job id {job_id!r} is taken") from None
                job_id = None
                continue  # the random suffix collided with an existing job: draw again
            self.log_dir(job_id).mkdir(parents=True, exist_ok=True, mode=0o700)
            self.reserve.ensure()
            return job_id
        raise StoreError(f"could not find a free job id for {name!r}")

    def resolve_id(self, prefix: str) -> str:
        """The job id that is ``prefix`` or starts with it; errors name the candidates."""
        if not prefix:
            raise JobNotFound("no job id given")
        with self._tx(write=False) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (prefix,)).fetchone():
                return prefix
            # substr() rather than LIKE: a '_' or '%' the user typed must not act as a wildcard.
            rows = conn.execute(
                "SELECT id, phase FROM jobs WHERE substr(id, 1, ?) = ? ORDER BY created_at DESC, rowid DESC",
                (len(prefix), prefix),
            ).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        if not rows:
            raise JobNotFound(f"no job matches {prefix!r} (store: {self.db_path})")
        shown = ", ".join(f"{r[0]} ({r[1]})" for r in rows[:10])
        more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        raise AmbiguousJobIdError(
            f"{prefix!r} matches {len(rows)} jobs: {shown}{more}; give more of the id",
            [str(r[0]) for r in rows],
        )

    def set_job_phase(
        self,
        job_id: str,
        phase: JobPhase,
        reason: str | None = None,
        message: str | None = None,
        condition: Condition | None = None,
        *,
        expect: Collection[JobPhase] | None = None,
        at: float | None = None,
    ) -> bool:
        """Move the job to ``phase`` with this reason and message (None clears them), in one transaction.

        Returns False, changing nothing, when the job is in a terminal phase already (the first
        ending wins: a cancel racing a success must not flip it back) or, with ``expect``, when
        the current phase is not one of those. Entering Running stamps ``started_at`` once;
        entering a terminal phase stamps ``finished_at``: ``at`` (epoch seconds; a supervisor found
        dead ended when it last gave a sign of life), else now.
        """
        now = time.time() if at is None else at
        with self._tx(write=True) as conn:
            row = conn.execute("SELECT phase FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise JobNotFound(f"no job {job_id!r}")
            current = JobPhase(row[0])
            if expect is not None and current not in expect:
                return False
            if current.is_terminal and phase != current:
                return False
            conn.execute(
                "UPDATE jobs SET phase = ?, reason = ?, message = ?,"
                " started_at = CASE WHEN ? AND started_at IS NULL THEN ? ELSE started_at END,"
                " finished_at = CASE WHEN ? AND finished_at IS NULL THEN ? ELSE finished_at END"
                " WHERE id = ?",
                (
                    str(phase),
                    reason,
                    message,
                    phase is JobPhase.RUNNING,
                    now,
                    phase.is_terminal,
                    now,
                    job_id,
                ),
            )
            if condition is not None:
                self._insert_condition(conn, job_id, condition)
        return True

    def record_phase(self, job_id: str, phase: JobPhase, reason: str, message: str) -> bool:
        """`set_job_phase` with a condition named after the phase saying the same (`Cancelled`: "by request")."""
        condition = Condition(phase.value, ConditionStatus.TRUE, reason, message, time.time())
        return self.set_job_phase(job_id, phase, reason=reason, message=message, condition=condition)

    def set_supervisor(self, job_id: str, pid: int | None) -> None:
        """Record the process supervising the job (None: no supervisor), with its start time."""
        start = None if pid is None else proc_start_time(pid)
        self._update_job(job_id, "supervisor_pid = ?, supervisor_start_time = ?", (pid, start))

    def supervisor_process(self, job_id: str) -> tuple[int, int | None] | None:
        """The recorded supervisor as (pid, start time), alive or not; None when none is recorded."""
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT supervisor_pid, supervisor_start_time FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        if row is None:
            raise JobNotFound(f"no job {job_id!r}")
        pid, start = row
        return None if pid is None else (int(pid), None if start is None else int(start))

    def live_supervisor_pid(self, job_id: str) -> int | None:
        """The supervisor's pid if that very process is still running, else None. Safe to signal."""
        record = self.supervisor_process(job_id)
        if record is None or not pid_alive(*record):
            return None
        return record[0]

    def recorded_supervisor_pid(self, job_id: str) -> int | None:
        """The pid a supervisor recorded and has not cleared (it clears it when it ends), alive or not."""
        record = self.supervisor_process(job_id)
        return None if record is None else record[0]

    def supervisor_alive(self, job_id: str) -> bool:
        return self.live_supervisor_pid(job_id) is not None

    def record_restart(self, job_id: str) -> int:
        """Count one restart of the whole replica group (``backoffCount``); returns the new count."""
        with self._tx(write=True) as conn:
            cur = conn.execute("UPDATE jobs SET backoff_count = backoff_count + 1 WHERE id = ?", (job_id,))
            if cur.rowcount == 0:
                raise JobNotFound(f"no job {job_id!r}")
            return int(conn.execute("SELECT backoff_count FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])

    def add_condition(self, job_id: str, condition: Condition) -> None:
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFound(f"no job {job_id!r}")
            self._insert_condition(conn, job_id, condition)

    def set_first_failure(self, job_id: str, failure: FailureSummary | None) -> None:
        """Record (or replace, as the policy's action evolves) why the job failed."""
        text = None if failure is None else json.dumps(failure.to_dict())
        self._update_job(job_id, "first_failure_json = ?", (text,))

    def set_plan_json(self, job_id: str, plan_json: str | None) -> None:
        if plan_json is not None:
            _check_json("plan_json", plan_json)
        self._update_job(job_id, "plan_json = ?", (plan_json,))

    def set_spec_json(self, job_id: str, spec_json: str) -> None:
        """Replace the job's spec (an elastic job scaled: `resume` and `describe` then see its new size)."""
        _check_json("spec_json", spec_json)
        self._update_job(job_id, "spec_json = ?", (spec_json,))

    def get_spec_json(self, job_id: str) -> str:
        return str(self._job_column(job_id, "spec_json"))

    def get_plan_json(self, job_id: str) -> str | None:
        value = self._job_column(job_id, "plan_json")
        return None if value is None else str(value)

    def expired_jobs(self, now: float | None = None) -> list[str]:
        """Finished jobs whose ttlSecondsAfterFinished has passed (by ``now``, default the time), oldest first."""
        terminal = [str(p) for p in JobPhase if p.is_terminal]
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT id FROM jobs WHERE ttl_seconds_after_finished IS NOT NULL AND finished_at IS NOT NULL"
                f" AND finished_at + ttl_seconds_after_finished <= ? AND phase IN ({', '.join('?' for _ in terminal)})"
                " ORDER BY finished_at",
                (time.time() if now is None else now, *terminal),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def delete_job(self, job_id: str) -> None:
        """Forget the job and remove its log directory. Stopping its processes is the caller's job."""
        with self._tx(write=True) as conn:
            # Explicit deletes, not only ON DELETE CASCADE: a connection opened without
            # foreign_keys (an older kubetrain, the sqlite3 shell) must not leave orphans behind.
            for table in ("requests", "conditions", "replicas"):
                conn.execute(f"DELETE FROM {table} WHERE job_id = ?", (job_id,))
            if conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount == 0:
                raise JobNotFound(f"no job {job_id!r}")
        import shutil  # only delete needs it; keep it off the start-up path of every command

        shutil.rmtree(self.log_dir(job_id), ignore_errors=True)

    def _update_job(self, job_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        with self._tx(write=True) as conn:
            cur = conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*params, job_id))
            if cur.rowcount == 0:
                raise JobNotFound(f"no job {job_id!r}")

    def _job_column(self, job_id: str, column: str) -> Any:
        with self._tx(write=False) as conn:
            row = conn.execute(f"SELECT {column} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(f"no job {job_id!r}")
        return row[0]

    @staticmethod
    def _insert_condition(conn: sqlite3.Connection, job_id: str, c: Condition) -> None:
        conn.execute(
            "INSERT INTO conditions (job_id, seq, type, status, reason, message, time)"
            " SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM conditions WHERE job_id = ?",
            (job_id, str(c.type), str(c.status), c.reason, c.message, c.time, job_id),
        )
