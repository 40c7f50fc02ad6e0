"""A live view of one job: its workload objects and its pods, kept current by list + watch.

Two informers per job, whatever its length or size: one on the workload kind (``batch/v1`` Jobs,
JobSets, Volcano Jobs or a Kubeflow kind) and one on pods, both selected by ``kubetrain.dev/job``.
Each lists once, then watches from the list's resourceVersion, so nothing that happens between the
list and the watch is missed (a job that finishes in that gap is seen finished). When the server ends
the stream (``timeoutSeconds``) the watch resumes from the last version seen (bookmarks keep it fresh);
when that version has expired (410 Gone) it lists again, which yields the current state, terminal
included, and watches on from there. Connection errors back off and resume the same way.

Readers wait on :meth:`JobWatch.wait_change` (a condition variable), never poll.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from ...contract.labels import JOB_LABEL
from .client.errors import ApiError
from .client.kube import Kube
from .client.resources import PODS, Resource
from .client.transport import JSON
from .essentials import Pod, name_and_version, pod_essentials, same_essentials

Obj = TypeVar("Obj", bound=Mapping[str, Any])
"""What an informer keeps of each object: the object (JSON), or what its ``keep`` makes of it (a `KeptPod`)."""


class Informer(Generic[Obj]):
    """One resource kind, one selector: a cache of objects by name, kept current by a thread."""

    def __init__(
        self,
        kube: Kube,
        res: Resource,
        namespace: str,
        label_selector: str,
        on_change: Callable[[], None],
        *,
        timeout_seconds: int = 290,
        keep: Callable[[JSON, Obj | None], Obj] | None = None,
        same: Callable[[Obj, Obj], bool] | None = None,
        page: int = 500,
    ) -> None:
        """``keep``: what of each object is kept (the rest is dropped as it arrives: a pod's essentials, not the
        whole pod), given the version kept before (None for a new object); ``same``: whether a new version of a
        kept object is no news (then readers are not woken); ``page``: objects a page of a list."""
        self.kube = kube
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.timeout_seconds = timeout_seconds
        self._on_change = on_change
        self._keep = keep
        self._same = same
        self._page = page
        self._lock = threading.Lock()
        self.objects: dict[str, Obj] = {}
        self.deleted: dict[str, Obj] = {}
        self.resource_version = ""
        self.synced = threading.Event()
        self.error: BaseException | None = None
        self.relists = 0
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> Informer[Obj]:
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.res.plural}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.stop()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def snapshot(self) -> list[Obj]:
        with self._lock:
            return list(self.objects.values())

    # -- the loop -------------------------------------------------------------------------------------

    def relist(self) -> None:
        items: list[Obj]
        if self._keep is not None:
            items, rv = self.kube.list(self.res, self.namespace, label_selector=self.label_selector,
                                       keep=self._keep_or_reuse, page=self._page)
        else:  # the objects as listed: ``Obj`` is JSON
            listed, rv = self.kube.list(self.res, self.namespace, label_selector=self.label_selector, page=self._page)
            items = cast(list[Obj], listed)
        with self._lock:
            fresh = {name_and_version(i)[0]: i for i in items}
            for name, old in self.objects.items():
                if name not in fresh:
                    self.deleted[name] = old
            self.objects = fresh
            self.resource_version = rv
        self.synced.set()
        self._on_change()

    def _keep_or_reuse(self, item: JSON) -> Obj:
        """What is kept of a listed object: the one kept already when its version has not moved (a relist after a
        410 then holds one copy of the pods that did not change, not two while the pages are read)."""
        assert self._keep is not None
        name, version = name_and_version(item)
        old = self.objects.get(name or "")  # this thread is the only writer: no lock to read
        if version and old is not None and name_and_version(old)[1] == version:
            return old
        return self._keep(item, old)

    def _apply(self, event: JSON) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj.setdefault("apiVersion", self.res.api_version)
        obj.setdefault("kind", self.res.kind)
        name = obj["metadata"]["name"]
        # This thread is the only writer: no lock to read the version kept. Without ``keep``, ``Obj`` is JSON.
        kept = self._keep(obj, self.objects.get(name)) if self._keep is not None else cast(Obj, obj)
        with self._lock:
            if kind == "DELETED":
                self.objects.pop(name, None)
                self.deleted[name] = kept
            else:
                before = self.objects.get(name)
                self.objects[name] = kept
                if before is not None and self._same is not None and self._same(before, kept):
                    if rv:
                        self.resource_version = rv
                    return  # nothing a reader looks at changed: no one is woken, nothing recomputed
            if rv:
                self.resource_version = rv
        self._on_change()

    def _run(self) -> None:
        attempt = 0
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                for event in self.kube.watch(self.res, self.namespace, self.resource_version,
                                             label_selector=self.label_selector,
                                             timeout_seconds=self.timeout_seconds, stopper=self._set_watch,
                                             stopped=self._stop.is_set):
                    if self._stop.is_set():
                        break
                    self._apply(event)
                    attempt = 0
            except ApiError as exc:
                if self._stop.is_set():
                    break
                if exc.gone:
                    # Our version left the server's history: what we missed is in a fresh list.
                    self.relists += 1
                    need_list = True
                    continue
                if not exc.transient or attempt + 1 >= max(self.kube.retry.attempts, 8):
                    self.error = exc
                    self.synced.set()
                    self._on_change()
                    return
                self.kube.retry.wait(attempt, exc)
                attempt += 1
            except Exception as exc:  # never die silently: readers see .error
                self.error = exc
                self.synced.set()
                self._on_change()
                return

    def _set_watch(self, w: Any) -> None:
        self._watch = w
        if self._stop.is_set():
            w.stop()


POD_PAGE = 100
"""Pods a page when the watch lists them (at its start, and again when it fell behind the server's history): a
page is held whole while its pods are reduced to their essentials, and 500 whole pods (kubectl's page) are ~2 MB
of JSON and several MB once parsed, more than the essentials of 2,000 pods. Five times the requests of a list;
each a few milliseconds."""


class JobWatch:
    """Workloads + pods of one job, with a change counter readers can wait on.

    ``with JobWatch(kube, ns, job_label, workload_res) as jw: jw.wait_change(...)``.
    """

    def __init__(self, kube: Kube, namespace: str, job_label: str, workload: Resource, *,
                 timeout_seconds: int = 290, pod_selector: str | None = None,
                 keep_pods: Callable[[list[Pod]], list[Pod]] | None = None) -> None:
        """``pod_selector``: the pods' selector when they do not carry kubetrain's job label (a document
        submitted as written: its controller's labels); ``keep_pods``: which of those are the job's."""
        selector = f"{JOB_LABEL}={job_label}"
        self.job_label = job_label
        self.namespace = namespace
        self._keep_pods = keep_pods
        self._cond = threading.Condition()
        self.version = 0
        self.workloads: Informer[JSON] = Informer(kube, workload, namespace, selector, self._changed,
                                                  timeout_seconds=timeout_seconds)
        # Pods are kept as their essentials (what status, diagnosis and log streams read): flat memory per replica.
        self.pods: Informer[Pod] = Informer(kube, PODS, namespace, selector if pod_selector is None else pod_selector,
                                            self._changed, timeout_seconds=timeout_seconds, keep=pod_essentials,
                                            same=same_essentials, page=POD_PAGE)
        #: monotonic time of the latest change (what the latency benchmark reads)
        self.changed_at = 0.0
        self._started = False

    def _changed(self) -> None:
        with self._cond:
            self.version += 1
            self.changed_at = time.monotonic()
            self._cond.notify_all()

    def start(self) -> JobWatch:
        """Start both informers (once: a started watch used as a context manager is not started again)."""
        if not self._started:
            self._started = True
            self.workloads.start()
            self.pods.start()
        return self

    def stop(self) -> None:
        self.workloads.stop()
        self.pods.stop()
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> JobWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in (self.workloads, self.pods):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(left):
                return False
        return True

    def wait_change(self, seen: int, timeout: float | None = None) -> int:
        """Block until the version differs from ``seen`` (or the timeout); returns the current version."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != seen, timeout)
            return self.version

    @property
    def error(self) -> BaseException | None:
        return self.workloads.error or self.pods.error

    def snapshot(self) -> tuple[list[JSON], list[Pod], bool]:
        """(workload objects, pods, whether a workload object was deleted since the watch began)."""
        pods = self.pods.snapshot()
        if self._keep_pods is not None:
            pods = self._keep_pods(pods)
        return self.workloads.snapshot(), pods, bool(self.workloads.deleted)


__all__ = ["Informer", "JobWatch"]
