"""The local backend's job store: SQLite under the user's state directory, logs beside it.

Layout of the state directory (:func:`store_connection.state_dir`)::

    jobs.db                         jobs, replicas, conditions, requests
    logs/<job_id>/<role>-<index>.log

`JobStore` is the store as its users see it: one object over the database (`store_connection`: opening,
transactions, a disk-full reserve), whose operations are grouped by table (`store_jobs`, `store_replicas`,
`store_requests`), and the job's status read from all of them at once (here), as one consistent snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ...contract.errors import JobNotFound
from ...status import Condition, ConditionStatus, FailureSummary, JobPhase, JobStatus, ReplicaPhase, ReplicaStatus
from .store_connection import CONDITION_COLUMNS, JOB_COLUMNS, REPLICA_COLUMNS
from .store_jobs import JobRecords
from .store_replicas import ReplicaRecords
from .store_requests import SupervisorRequests


class JobStore(JobRecords, ReplicaRecords, SupervisorRequests):
    """The job records of the local backend. One SQLite connection per store object.

    ``path`` is the state directory (default :func:`store_connection.state_dir`), or a ``*.db`` file whose
    directory then holds the logs. A store object may be shared by threads; after
    ``fork()`` the child transparently opens its own connection.
    """

    def get_status(self, job_id: str) -> JobStatus:
        """The job as the shared status model. ``job_id`` must be a full id (see :meth:`resolve_id`)."""
        statuses = self._load("WHERE id = ?", (job_id,))
        if not statuses:
            raise JobNotFound(f"no job {job_id!r}")
        return statuses[0]

    def list_jobs(self, limit: int | None = None, phases: Collection[JobPhase] | None = None) -> list[JobStatus]:
        """Jobs newest first, optionally only those in ``phases`` and at most ``limit`` of them."""
        where = ""
        params: list[Any] = []
        if phases is not None:
            if not phases:
                return []
            where = f"WHERE phase IN ({', '.join('?' for _ in phases)})"
            params += [str(p) for p in phases]
        clause = f"{where} ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            clause += " LIMIT ?"
            params.append(limit)
        return self._load(clause, tuple(params))

    def _load(self, clause: str, params: tuple[Any, ...]) -> list[JobStatus]:
        # Three queries in one read transaction: a consistent snapshot, and no query per job.
        with self._tx(write=False) as conn:
            jobs = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs {clause}", params).fetchall()
            if not jobs:
                return []
            selected = f"SELECT id FROM jobs {clause}"
            replicas = conn.execute(
                f"SELECT {REPLICA_COLUMNS} FROM replicas WHERE job_id IN ({selected}) ORDER BY job_id, pos",
                params,
            ).fetchall()
            conditions = conn.execute(
                f"SELECT {CONDITION_COLUMNS} FROM conditions WHERE job_id IN ({selected}) ORDER BY job_id, seq",
                params,
            ).fetchall()
        by_job_replicas: dict[str, list[ReplicaStatus]] = {}
        for jid, role, idx, phase, code, sig, restarts, pid, host, started, finished, reason, msg in replicas:
            by_job_replicas.setdefault(jid, []).append(
                ReplicaStatus(
                    role=role,
                    index=idx,
                    phase=ReplicaPhase(phase),
                    exit_code=code,
                    signal=sig,
                    restarts=restarts,
                    pid=pid,
                    host=host,
                    started_at=started,
                    finished_at=finished,
                    reason=reason,
                    message=msg,
                )
            )
        by_job_conditions: dict[str, list[Condition]] = {}
        for jid, ctype, cstatus, reason, msg, ctime in conditions:
            by_job_conditions.setdefault(jid, []).append(Condition(ctype, ConditionStatus(cstatus), reason, msg, ctime))
        out = []
        for (
            jid,
            name,
            backend,
            namespace,
            phase,
            backoff_count,
            backoff_limit,
            reason,
            message,
            created,
            started,
            finished,
            failure_json,
        ) in jobs:
            out.append(
                JobStatus(
                    job_id=jid,
                    name=name,
                    backend=backend,
                    namespace=namespace,
                    phase=JobPhase(phase),
                    replicas=by_job_replicas.get(jid, []),
                    backoff_count=backoff_count,
                    backoff_limit=backoff_limit,
                    conditions=by_job_conditions.get(jid, []),
                    reason=reason,
                    message=message,
                    created_at=created,
                    started_at=started,
                    finished_at=finished,
                    first_failure=FailureSummary.from_dict(json.loads(failure_json)) if failure_json else None,
                )
            )
        return out
