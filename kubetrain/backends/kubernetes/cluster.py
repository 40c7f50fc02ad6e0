"""`Cluster`: one cluster as the Kubernetes backend reads it — the client, what it serves, whose controllers
are alive — and a job on it: found by name, its status (Pending replicas explained), watched, cancelled.

What the follower (:mod:`.follow`), the change feed (:mod:`.changes`) and a document submitted as written
(:mod:`.as_written`) need of the backend, below them: :class:`.backend.KubernetesBackend` is a `Cluster` with the
`Backend` protocol's operations on top, so that those modules are handed the cluster rather than calling back
up into the backend that called them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ...contract.naming import label_value
from ...status import Condition, ConditionStatus, JobPhase, JobStatus, stopped_by_cancel
from .capabilities import Capabilities, detect
from .client.config import connect
from .client.errors import KubernetesError
from .client.kube import Kube
from .client.resources import PODS, Resource
from .client.retry import RetryPolicy
from .client.transport import server_of
from .describe import last_lines, pending_reason
from .diagnose import Diagnosis, diagnose, untouched_for
from .flavors import FLAVORS, WRITTEN, Controller, Flavor, workload_resources
from .liveness import Liveness, LivenessCache
from .liveness import check as check_liveness
from .lookup import Located, PodScope, job_pods, locate, locate_with_pods
from .options import KubernetesOptions
from .status_map import PodIndex, flavor_of, job_status, meta, roles_of
from .watch import JobWatch


class Cluster:
    """A cluster, reached through a kubeconfig (``context``) or the in-cluster service account (or a configured
    ``api_client``), opened with the backend's options (:class:`.options.KubernetesOptions`)."""

    name = "kubernetes"

    def __init__(self, options: KubernetesOptions, *, api_client: Any = None, retry: RetryPolicy | None = None) -> None:
        """``options``: kept whole, each read where it is used. ``api_client`` (a configured client instead of
        a kubeconfig) and ``retry`` are for tests and tools: objects, not options."""
        self.options = options
        context_namespace: str | None = None
        source = "api client"
        host = server_of(api_client) if api_client is not None else ""
        self.context = host or "api-client"
        """The kubeconfig context (a configured api client: its server): what is kept of this cluster's jobs on
        this machine (their logs) is filed under it."""
        if api_client is None:
            conn = connect(options.kubeconfig, options.context, in_cluster=options.in_cluster)
            api_client, context_namespace, source = conn.api_client, conn.namespace, conn.source
            self.context = conn.context
        self.kube = Kube(api_client, retry, known=workload_resources())
        self.namespace = options.namespace or context_namespace or "default"
        self._caps: Capabilities | None = None
        self._liveness = LivenessCache(f"{self.kube.host} {source}", options.liveness_ttl)

    def close(self) -> None:
        self.kube.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def capabilities(self, refresh: bool = False) -> Capabilities:
        if self._caps is None or refresh:
            self._caps = detect(self.kube)
        return self._caps

    def liveness(self, engine: Flavor, namespace: str | None = None, *, refresh: bool = False) -> Liveness:
        """Whether ``engine``'s controller shows signs of life (:mod:`.liveness`), cached per context."""
        key = engine.name
        found = None if refresh else self._liveness.get(key)
        if found is None:
            controller = engine.controller or Controller(f"the controller of {engine.name}")
            found = check_liveness(self.kube, controller, engine.served_resources(self.kube, self.capabilities()),
                                   self._ns(namespace), untouched_after=self.options.untouched_after)
            self._liveness.put(key, found)
        return found

    def engines(self, namespace: str | None = None) -> list[str]:
        """What this cluster can run, a line per engine whose API it serves (the flavors, then the kinds
        followed as written): whether its controller shows life, and what says so; then the flavors whose API
        is not served."""
        caps = self.capabilities()
        lines = []
        for engine in [*FLAVORS.values(), *WRITTEN]:
            if caps.missing(engine) is not None or not engine.served_resources(self.kube, caps):
                continue
            seen = self.liveness(engine, namespace)
            verdict = {"live": "runs here", "dead": "API served, controller not running",
                       "unknown": "API served, controller not seen"}[seen.state]
            label = engine.name if engine.as_written else f"flavor {engine.name}"
            lines.append(f"{label}: {verdict} ({seen.evidence})")
        missing = [name for name, f in FLAVORS.items() if caps.missing(f) is not None]
        if missing:
            lines.append("not served: " + ", ".join(f"flavor {m}" for m in missing))
        return lines

    def _locate(self, name: str, namespace: str | None) -> Located:
        return locate(self.kube, self.capabilities(), name, self._ns(namespace))

    def _locate_with_pods(self, name: str, namespace: str | None) -> tuple[Located, list[Any]]:
        """The job and its pods (listed while the job is looked up, when its label finds them)."""
        return locate_with_pods(self.kube, self.capabilities(), name, self._ns(namespace))

    def status_in(self, name: str, namespace: str | None, *, explain: bool = True) -> JobStatus:
        loc, pods = self._locate_with_pods(name, namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor)
        if explain:
            status = self.explain(status, loc.workloads, pods, flavor=loc.flavor)
        return status

    def explain(self, status: JobStatus, workloads: Sequence[Any], pods: Sequence[Any],
                diagnoses: Sequence[Diagnosis] | None = None, *, flavor: Flavor | None = None,
                grouped: PodIndex | None = None) -> JobStatus:
        """Why Pending replicas are (the reason and message), what the failed replica said last."""
        if diagnoses is None:
            diagnoses = self.diagnose_pending(status, workloads, pods, flavor=flavor, grouped=grouped)
        pending_reason(status, diagnoses)
        if status.first_failure is not None and not status.first_failure.last_lines:
            found = flavor if flavor is not None or not workloads else flavor_of(workloads[0])
            roles = roles_of(found, found.order(workloads)) if found is not None and workloads else []
            status.first_failure.last_lines = last_lines(self.kube, status, pods, roles)
        return status

    def diagnose_pending(self, status: JobStatus, workloads: Sequence[Any], pods: Sequence[Any],
                         *, reads: bool = True, flavor: Flavor | None = None,
                         grouped: PodIndex | None = None) -> list[Diagnosis]:
        """Why replicas are Pending (``reads=False``: only what the pods show, no request); ``flavor``: the
        job's, when known; ``grouped``: the pods by replica, when the caller has them."""
        caps = self.capabilities() if reads else None
        return diagnose(self.kube if reads else None, status, workloads, pods,
                        kueue_version=caps.kueue_version if caps else None,
                        untouched_after=self.options.untouched_after, flavor=flavor, grouped=grouped)

    def until_untouched(self, status: JobStatus | None, jw: JobWatch) -> float | None:
        """Seconds until a job nothing has acted on has waited ``untouched_after`` (None: no such wait): when a
        watch that sees no event should look again."""
        if status is None:
            return None
        workloads, pods, _ = jw.snapshot()
        age = untouched_for(status, workloads, pods)
        if age is None or age >= self.options.untouched_after:
            return None
        return max(0.01, self.options.untouched_after - age)

    def watch(self, name: str, namespace: str | None = None, *, resource: Resource | None = None,
              scope: PodScope | None = None) -> JobWatch:
        """A started :class:`JobWatch` on the job (stop it, or use it as a context manager). ``resource``: the
        job's workload kind when known (as after a submit), which saves looking the job up; ``scope``: where
        its pods are when they do not carry kubetrain's job label (a document submitted as written)."""
        if resource is None:
            loc = self._locate(name, namespace)
            ns, label, resource, scope = loc.namespace, loc.name, loc.resource, loc.pods
        else:
            ns, label = self._ns(namespace), label_value(name)
        keep: Callable[[list[Any]], list[Any]] | None = None
        if scope is not None and scope.owner_uid is not None:
            owned = scope

            def keep(pods: list[Any]) -> list[Any]:
                return owned.keep(self.kube, ns, pods)

        return JobWatch(self.kube, ns, label, resource, timeout_seconds=self.options.watch_timeout,
                        pod_selector=scope.selector if scope is not None else None, keep_pods=keep).start()

    def cancel_in(self, name: str, namespace: str | None) -> JobStatus:
        loc = self._locate(name, namespace)
        pods = job_pods(self.kube, loc.name, loc.namespace, loc.pods)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor)
        if status.phase.is_terminal:
            raise KubernetesError(f"job {loc.name} has already ended ({status.phase.value}); "
                                  f"kubetrain delete {loc.name} removes it")
        if loc.flavor.keeps_finished_pods(loc.root):
            for pod in pods:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    self.kube.merge_patch(PODS, meta(pod)["name"], loc.namespace,
                                          {"metadata": {"ownerReferences": None}})
        self.kube.delete(loc.resource, meta(loc.root)["name"], loc.namespace, propagation="Foreground")
        now = time.time()
        status.phase = JobPhase.CANCELLED
        status.reason, status.message, status.finished_at = "Cancelled", "cancelled by request", now
        stopped_by_cancel(status.replicas, now)  # their pods are being deleted: none will say it
        status.conditions.append(Condition("Cancelled", ConditionStatus.TRUE, "Cancelled", "cancelled by request", now))
        return status


__all__ = ["Cluster"]
