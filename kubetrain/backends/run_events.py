"""What a run tells its caller as it goes (`Backend.run`'s `on_event` and `on_status`): kubetrain's own
messages, one line each, and the run as data (`RunEvent`), sent once per change of what a status shows.

Apart from `base` (the interface) so that the interface module holds the calls and this one the events a
caller receives; `base` re-exports every name, which is where callers take them from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..status import JobStatus

EventSink = Callable[[str], None]
"""Receives kubetrain's own messages about a run (created, restarting, Pending because ...), one line each."""

RunEventKind = Literal["created", "status", "warning", "message"]


@dataclass(frozen=True)
class RunEvent:
    """One thing a backend tells about a run, as data: what a program (the live status line, a notebook, the
    web view) needs without reading message text, whose wording may change.

    - `created`: the job exists; `job_id` is the id every other call takes. Sent once, as soon as the job
      exists, before any `status` event.
    - `status`: the job's or a replica's phase, reason or restarts changed; `status` is the job's status
      then (on Kubernetes from the backend's own watch: pods being scheduled, pulling, starting).
    - `warning`: what the backend honours only approximately (`text` without the `warning: ` prefix).
    - `message`: any other of kubetrain's messages (`text`, as `on_event` gets it).
    """

    kind: RunEventKind
    text: str
    """One line for a person: the message; for `created` and `status`, a summary."""
    job_id: str | None = None
    """The run's job id, once it is known (every event after `created`)."""
    status: JobStatus | None = None
    """`status` events: the job's status (a snapshot of the receiver's own)."""


RunEventSink = Callable[[RunEvent], None]
"""`Backend.run(on_status=...)`: receives every `RunEvent` of the run.

Why a second callback and not `on_event` carrying richer objects: `on_event` consumers print each line
(the CLI, CI logs, programs collecting messages), and a status change has no line worth printing: a job of
64 replicas would print one per pod scheduled, pulled, started. So `on_event` keeps exactly the lines it
had, and a program that wants the run as data passes `on_status` and gets everything there, messages
included (kind `message`/`warning`, the same text), so it needs only the one."""

WARNING_PREFIX = "warning: "
"""How a warning reads on `on_event` (`Backend.run`)."""


class RunEvents:
    """A backend's side of one run's two callbacks: each message as a line to `on_event` and as a `RunEvent`
    to `on_status`; the job's status to `on_status` only when something a person would see changed (phases,
    reasons, restarts), however often the backend looks. Either callback may be None."""

    def __init__(self, on_event: EventSink | None, on_status: RunEventSink | None) -> None:
        self.on_event = on_event
        self.on_status = on_status
        self.job_id: str | None = None
        self._last: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    @property
    def wants_status(self) -> bool:
        """Someone receives status events: worth the work of building a status."""
        return self.on_status is not None

    def created(self, job_id: str, text: str, *, say: bool = True) -> None:
        """The job exists. `say`: `text` is also one of the run's messages (else only the event's summary)."""
        self.job_id = job_id
        if say and self.on_event is not None:
            self.on_event(text)
        if self.on_status is not None:
            self.on_status(RunEvent("created", text, job_id))

    def message(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)
        if self.on_status is not None:
            self.on_status(RunEvent("message", text, self.job_id))

    def warning(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(WARNING_PREFIX + text)
        if self.on_status is not None:
            self.on_status(RunEvent("warning", text, self.job_id))

    def say(self, line: str) -> None:
        """A line from code that speaks only text (`on_event`'s convention): a warning when it says so."""
        if line.startswith(WARNING_PREFIX):
            self.warning(line[len(WARNING_PREFIX) :])
        else:
            self.message(line)

    def status(self, status: JobStatus) -> None:
        """The job's status now; an event only if it differs from the last one sent in what it shows."""
        if self.on_status is None:
            return
        seen = (
            status.phase,
            status.reason,
            status.backoff_count,
            tuple((r.role, r.index, r.phase, r.reason, r.restarts) for r in status.replicas),
        )
        with self._lock:  # backends may report from more than one thread
            if seen == self._last:
                return
            self._last = seen
        self.on_status(RunEvent("status", status.summary_line(), self.job_id or status.job_id, status))


__all__ = ["WARNING_PREFIX", "EventSink", "RunEvent", "RunEventKind", "RunEventSink", "RunEvents"]
