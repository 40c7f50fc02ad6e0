"""One open backend as the web view reads it: its jobs as rows, a job's page, its change feed.

Everything goes through the `Backend` interface: `list`, `describe` (its status, spec and Pending causes),
`framework`, `logs`, `metrics`, the actions, and `changes`, the backend's own signal that something changed
(`changes.py` turns it into a feed pages wait on). Calls block (SQLite, the Kubernetes API): the app runs
them in threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..contract.errors import JobNotFound
from .changes import ChangeFeed
from .views import JobDetail, JobRow, job_detail, job_row, spec_text

if TYPE_CHECKING:
    from ..backends.base import Backend, Changes, Description
    from ..contract.logs import LogRecord
    from ..metrics.sample import MetricSample


class Source:
    """A backend, its change feed and what the pages need from it."""

    def __init__(self, backend: Backend, feed: ChangeFeed | None = None) -> None:
        self.backend = backend
        self.name = backend.name
        self.feed = feed if feed is not None else ChangeFeed()
        self.changes: Changes | None = None
        self._frameworks: dict[str, str] = {}
        # Every viewer recomputes on the same change: the first computes, the others get its result.
        self._lock = threading.Lock()
        self._rows: tuple[int, list[JobRow]] | None = None
        self._details: dict[str, tuple[int, JobDetail, Description]] = {}

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> Source:
        self.changes = self.backend.changes(self.feed.bump)
        return self

    def close(self) -> None:
        """Stop watching (the backend stays open: whoever opened it closes it)."""
        if self.changes is not None:
            self.changes.stop()

    # -- reading ----------------------------------------------------------------------------------------

    def rows(self) -> list[JobRow]:
        """The jobs table's rows, newest first (computed once per change of the feed)."""
        with self._lock:
            version = self.feed.version
            if self._rows is not None and self._rows[0] == version:
                return self._rows[1]
            rows = [job_row(s, self._framework(s.job_id)) for s in self.backend.list()]
            self._rows = (version, rows)
            return rows

    def _framework(self, job_id: str) -> str:
        """The job's framework (it never changes, so it is looked up once per job)."""
        known = self._frameworks.get(job_id)
        if known is not None:
            return known
        try:
            found = self.backend.framework(job_id)
        except Exception:  # deleted meanwhile: nothing to show
            found = ""
        if found:
            self._frameworks[job_id] = found
        return found

    def _described(self, job_id: str) -> tuple[JobDetail, Description]:
        """The job page's data and the description it comes from (computed once per change of the feed;
        the caller holds the lock)."""
        version = self.feed.version
        cached = self._details.get(job_id)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        desc = self.backend.describe(job_id)
        status = desc.status
        detail = job_detail(status, self._framework(status.job_id), [d.to_dict() for d in desc.diagnoses])
        if len(self._details) > 256:
            self._details.clear()
        self._details[job_id] = (version, detail, desc)
        return detail, desc

    def detail(self, job_id: str) -> JobDetail:
        """The job page's data (computed once per change of the feed)."""
        with self._lock:
            return self._described(job_id)[0]

    def spec(self, job_id: str) -> str:
        """The job as submitted (local: the TrainJob document; Kubernetes: the root workload object)."""
        with self._lock:
            return spec_text(self._described(job_id)[1].spec)

    def logs(self, job_id: str, stop: threading.Event, **filters: Any) -> Iterator[LogRecord]:
        """The job's merged output, followed until it ends or `stop` is set (its viewer left; runs on a
        thread of its own). Metric lines (`kubetrain.metrics`, in the output on Kubernetes) are left out:
        the plots show them."""
        from ..metrics import is_metric_line

        records = self.backend.logs(job_id, follow=True, stop=stop, **filters)
        return (r for r in records if not is_metric_line(r.text))

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[MetricSample]:
        """The job's metric samples (`kubetrain.metrics.MetricSample`)."""
        return self.backend.metrics(job_id, follow=follow)

    def act(self, job_id: str, action: str) -> str:
        """Cancel, suspend, resume or delete; the job's phase after it ("Deleted" once deleted).

        Only the job whose whole id is `job_id`: a backend resolves a unique prefix, as `kubetrain cancel`
        does for a person typing, but an address's action acts on what its page showed, never on another
        job that happens to begin the same way (`/jobs/local/train/cancel` must not cancel `train-x4k2p`)."""
        backend = self.backend
        found = backend.status(job_id).job_id
        if found != job_id:
            raise JobNotFound(
                f"no job {job_id!r} in {self.name}: an action takes a job's whole id ({found!r} begins with it)"
            )
        if action == "delete":
            backend.delete(job_id)
            return "Deleted"
        calls = {"cancel": backend.cancel, "suspend": backend.suspend, "resume": backend.resume}
        return calls[action](job_id).phase.value


__all__ = ["Source"]
