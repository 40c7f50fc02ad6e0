"""The Kubernetes backend's change feed (`KubernetesBackend.changes`): its own informers on kubetrain's jobs.

One informer (`watch.Informer`: list, then watch from its resourceVersion, resuming after timeouts and
relisting after 410 Gone) per workload kind the cluster serves and one on pods, selected by kubetrain's
managed-by label in the backend's namespace. Any event is a change. What the informers hold answers
`framework` for a table of jobs without a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...contract.labels import JOB_LABEL, MANAGED_BY, MANAGER

if TYPE_CHECKING:
    from .cluster import Cluster


class ClusterChanges:
    """The backend's informers on kubetrain's workloads and pods of one namespace."""

    def __init__(self, backend: Cluster, on_change: Callable[[], None]) -> None:
        self.backend = backend
        self.on_change = on_change
        self._informers: list[Any] = []
        self._stopped = False

    def start(self) -> ClusterChanges:
        from .client.resources import PODS
        from .lookup import workload_kinds
        from .watch import Informer

        b = self.backend
        selector = f"{MANAGED_BY}={MANAGER}"
        for res in [*workload_kinds(b.kube, b.capabilities()), PODS]:
            informer: Informer[dict[str, Any]] = Informer(b.kube, res, b.namespace, selector, self.on_change,
                                                            timeout_seconds=b.options.watch_timeout)
            self._informers.append(informer.start())
        return self

    def stop(self) -> None:
        self._stopped = True
        for informer in self._informers:
            informer.stop()

    @property
    def running(self) -> bool:
        return bool(self._informers) and not self._stopped

    def workloads(self) -> list[dict[str, Any]]:
        """Every workload object the informers hold (the last informer is the pods')."""
        return [obj for informer in self._informers[:-1] for obj in informer.snapshot()]

    def framework(self, job_id: str) -> str:
        """The job's framework from the workloads held ("" when none of them tells)."""
        for obj in self.workloads():
            if ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL) == job_id:
                found = framework_in_manifest(obj)
                if found:
                    return found
        return ""

    @property
    def error(self) -> BaseException | None:
        return next((i.error for i in self._informers if i.error is not None), None)


def framework_in_manifest(obj: Any) -> str:
    """The framework a rendered workload object's pods are told (`KUBETRAIN_FRAMEWORK` in a container's env)."""
    from ...contract.env_names import FRAMEWORK

    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            if item.get("name") == FRAMEWORK and isinstance(item.get("value"), str):
                return str(item["value"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return ""


__all__ = ["ClusterChanges", "framework_in_manifest"]
