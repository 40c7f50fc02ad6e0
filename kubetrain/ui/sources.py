"""One open backend as the web view reads it: its jobs as rows, a job's page, its change feed.

Everything goes through the `Backend` interface (`list`, `describe`, `logs`, `metrics`, the actions); what
differs per backend is only where the framework and the spec are read from and which signal says that
something changed (`changes.py`). Calls block (SQLite, the Kubernetes API): the app runs them in threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .changes import ChangeFeed, KubernetesWatcher, LocalStoreWatcher, Watcher
from .views import JobDetail, JobRow, framework_in_manifest, framework_of_spec, job_detail, job_row, spec_text

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..contract.logs import LogRecord


class Source:
    """A backend, its change feed and what the pages need from it."""

    def __init__(self, backend: Backend, feed: ChangeFeed | None = None) -> None:
        self.backend = backend
        self.name = backend.name
        self.feed = feed if feed is not None else ChangeFeed()
        self.watcher: Watcher | None = None
        self._frameworks: dict[str, str] = {}
        # Every viewer recomputes on the same change: the first computes, the others get its result.
        self._lock = threading.Lock()
        self._rows: tuple[int, list[JobRow]] | None = None
        self._details: dict[str, tuple[int, JobDetail]] = {}

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> Source:
        from ..backends.kubernetes.backend import KubernetesBackend
        from ..backends.local.backend import LocalBackend

        if isinstance(self.backend, LocalBackend):
            self.watcher = LocalStoreWatcher(self.feed, self.backend.store.db_path).start()
        elif isinstance(self.backend, KubernetesBackend):
            self.watcher = KubernetesWatcher(self.feed, self.backend).start()
        return self

    def close(self) -> None:
        """Stop watching (the backend stays open: whoever opened it closes it)."""
        if self.watcher is not None:
            self.watcher.stop()

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
        found = ""
        if isinstance(self.watcher, KubernetesWatcher):
            from ..contract.labels import JOB_LABEL

            for obj in self.watcher.snapshot():
                if ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL) == job_id:
                    found = framework_in_manifest(obj)
                    if found:
                        break
        else:
            store = getattr(self.backend, "store", None)
            if store is not None:
                import json

                try:
                    found = framework_of_spec(json.loads(store.get_spec_json(job_id)))
                except Exception:  # deleted meanwhile: nothing to show
                    found = ""
        if found:
            self._frameworks[job_id] = found
        return found

    def detail(self, job_id: str) -> JobDetail:
        """The job page's data (computed once per change of the feed)."""
        with self._lock:
            version = self.feed.version
            cached = self._details.get(job_id)
            if cached is not None and cached[0] == version:
                return cached[1]
            desc = self.backend.describe(job_id)
            diagnoses = [d.to_dict() for d in getattr(desc, "diagnoses", [])]
            status = desc.status
            framework = self._framework(status.job_id) or framework_of_spec(getattr(desc, "spec", None))
            detail = job_detail(status, framework, diagnoses)
            if len(self._details) > 256:
                self._details.clear()
            self._details[job_id] = (version, detail)
            return detail

    def spec(self, job_id: str) -> str:
        """The job as submitted (local: the TrainJob document; Kubernetes: the root workload object)."""
        from ..backends.kubernetes.backend import KubernetesBackend

        with self._lock:
            if isinstance(self.backend, KubernetesBackend):
                from ..backends.kubernetes.lookup import locate

                b = self.backend
                root = dict(locate(b.kube, b.capabilities(), job_id, b.namespace).root)
                meta = dict(root.get("metadata") or {})
                meta.pop("managedFields", None)
                root["metadata"] = meta
                root.pop("status", None)
                return spec_text(root)
            desc = self.backend.describe(job_id)
            return spec_text(getattr(desc, "spec", None) or desc.to_dict().get("spec"))

    def logs(self, job_id: str, stop: threading.Event, **filters: Any) -> Iterator[LogRecord]:
        """The job's merged output, followed until it ends or `stop` is set (its viewer left; runs on a
        thread of its own). Metric lines (`kubetrain.metrics`, in the output on Kubernetes) are left out:
        the plots show them."""
        from ..metrics import is_metric_line

        records = self.backend.logs(job_id, follow=True, stop=stop, **filters)
        return (r for r in records if not is_metric_line(r.text))

    def has_metrics(self) -> bool:
        return callable(getattr(self.backend, "metrics", None))

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[Any]:
        """The job's metric samples (`kubetrain.metrics.MetricSample`); nothing when the backend has none."""
        call = getattr(self.backend, "metrics", None)
        if call is None:
            return iter(())
        samples: Iterator[Any] = call(job_id, follow=follow)
        return samples

    def act(self, job_id: str, action: str) -> str:
        """Cancel, suspend, resume or delete; the job's phase after it ("Deleted" once deleted)."""
        backend = self.backend
        if action == "delete":
            backend.delete(job_id)
            return "Deleted"
        calls = {"cancel": backend.cancel, "suspend": backend.suspend, "resume": backend.resume}
        return calls[action](job_id).phase.value


__all__ = ["Source"]
