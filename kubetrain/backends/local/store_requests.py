"""The requests table of the local job store: cancel, suspend, resume and scale asked of a supervisor.

The CLI records a request, then may signal the supervisor to wake it up. The row is the durable intent: a
signal can arrive before the supervisor installed its handlers, or find it dead, and carries no reason or
time. The supervisor marks a request handled once it acted on it, so ``describe`` can tell "cancel
requested" from "cancelled".
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from ...contract.errors import JobNotFound
from .store_connection import StoreConnection


class RequestKind(enum.StrEnum):
    CANCEL = "cancel"
    SUSPEND = "suspend"
    RESUME = "resume"
    SCALE = "scale"
    """An elastic job's launch record changed its replica count (`LocalBackend.scale`): start or stop the
    difference. The supervisor is woken with SIGUSR1, which, unlike SIGTERM, never means cancel."""


@dataclass(frozen=True)
class Request:
    id: int
    job_id: str
    kind: RequestKind
    created_at: float


class SupervisorRequests(StoreConnection):
    """The requests table: what a job's supervisor is asked to do, oldest first."""

    def add_request(self, job_id: str, kind: RequestKind) -> int:
        """Ask the job's supervisor to cancel, suspend or resume; returns the request id."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFound(f"no job {job_id!r}")
            cur = conn.execute(
                "INSERT INTO requests (job_id, kind, created_at) VALUES (?, ?, ?)",
                (job_id, str(kind), time.time()),
            )
            return int(cur.lastrowid or 0)

    def pending_requests(self, job_id: str) -> list[Request]:
        """Requests not handled yet, oldest first."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT id, job_id, kind, created_at FROM requests WHERE job_id = ? AND handled_at IS NULL ORDER BY id",
                (job_id,),
            ).fetchall()
        return [Request(rid, jid, RequestKind(kind), created) for rid, jid, kind, created in rows]

    def mark_request_handled(self, request_id: int) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "UPDATE requests SET handled_at = ? WHERE id = ? AND handled_at IS NULL",
                (time.time(), request_id),
            )
