"""Finding a job on the cluster by name: its workload objects (root first), its flavor, its pods.

A job is named by its ``metadata.name``, the ``kubetrain.dev/job`` label of all its objects, within a
namespace. Its workload kind is not known in advance: each kind the cluster serves is listed in turn,
the likeliest first (:func:`~.flavors.lookup_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...contract.errors import JobNotFound
from ...contract.labels import JOB_LABEL, MANAGED_BY, MANAGER
from ...contract.naming import label_value
from ...status import JobStatus
from .capabilities import Capabilities
from .client.ahead import Ahead
from .client.errors import ApiError, KubernetesError
from .client.kube import Kube
from .client.resources import PODS, Resource
from .describe import pending_reason
from .diagnose import diagnose
from .flavors import WRITTEN, Flavor, flavor_of, lookup_order
from .status_map import job_status, jobs_by_name
from .workload import JSON, is_root, labels, meta


def job_not_found(name: str, namespace: str) -> JobNotFound:
    """The error for a job name not found in a namespace, with the command that lists what is there."""
    return JobNotFound(f"no kubetrain job {name} in namespace {namespace} (kubetrain list --backend kubernetes "
                       f"-n {namespace})")


P = TypeVar("P", bound=Mapping[str, Any])
"""A pod, whole (JSON) or kept by a watch (`essentials.KeptPod`)."""


@dataclass
class PodScope:
    """How a job's pods are found: a label selector (kubetrain's job label; for a document submitted as
    written, the label its controller puts on them), and for kinds whose pods carry no label naming their
    job, the root they must belong to (directly, or through one object the root owns: a Run:ai workload's
    intermediate job)."""

    selector: str
    owner_uid: str | None = None
    _owned: dict[str, bool] = field(default_factory=dict)
    """Intermediate owner uid → whether the root owns it (read once each)."""

    def keep(self, kube: Kube | None, namespace: str, pods: Sequence[P]) -> list[P]:
        if self.owner_uid is None:
            return list(pods)
        return [p for p in pods
                if any(self._owns(kube, namespace, ref) for ref in meta(p).get("ownerReferences") or [])]

    def _owns(self, kube: Kube | None, namespace: str, ref: dict[str, Any]) -> bool:
        uid = str(ref.get("uid") or "")
        if uid == self.owner_uid:
            return True
        if uid not in self._owned:
            self._owned[uid] = False
            if kube is not None:
                try:
                    res = kube.resource_for(str(ref.get("apiVersion")), str(ref.get("kind")))
                    owner = kube.find(res, str(ref.get("name")), namespace)
                except (ApiError, KubernetesError):
                    owner = None
                refs = meta(owner or {}).get("ownerReferences") or []
                self._owned[uid] = any(r.get("uid") == self.owner_uid for r in refs)
        return self._owned[uid]


def pod_scope(flavor: Flavor | None, name: str, root: JSON | None) -> PodScope:
    """Where the pods of job ``name`` (its ``root`` workload) are: by its flavor's selector."""
    if flavor is None:
        return PodScope(f"{JOB_LABEL}={label_value(name)}")
    owner = meta(root or {}).get("uid") if flavor.pods_owned() else None
    return PodScope(flavor.pod_selector(name, root), owner)


@dataclass
class Located:
    """A job found on the cluster: its workload objects (root first), their flavor and resource."""

    name: str
    namespace: str
    flavor: Flavor
    resource: Resource
    workloads: list[JSON]

    @property
    def root(self) -> JSON:
        return self.workloads[0]

    @property
    def pods(self) -> PodScope:
        """Where its pods are (a document submitted as written: where its controller puts them)."""
        # A rendered job's pods carry its job label (its name); a document as written's, its own name.
        own = meta(self.root).get("name") if self.flavor.as_written else None
        return pod_scope(self.flavor, own or self.name, self.root)


def ordered(workloads: Sequence[JSON]) -> list[JSON]:
    """Workload objects, the root (the one nobody owns) first."""
    return sorted(workloads, key=lambda o: (not is_root(o), meta(o).get("name", "")))


def workload_kinds(kube: Kube, caps: Capabilities) -> list[Resource]:
    """The workload kinds this cluster serves, the likeliest first (a lookup lists them in turn): the flavors',
    then those of the kinds kubetrain submits as written (XGBoostJob, MPIJob v2beta1, DeepSpeedJob ...)."""
    out = [res for flavor in lookup_order() for res in flavor.served_resources(kube, caps)]
    for follower in WRITTEN:
        out += [res for res in follower.served_resources(kube, caps) if res not in out]
    return out


def locate(kube: Kube, caps: Capabilities, name: str, namespace: str) -> Located:
    selector = f"{JOB_LABEL}={label_value(name)}"
    for res in workload_kinds(kube, caps):
        items, _ = kube.list(res, namespace, label_selector=selector)
        found = jobs_by_name(items).get(label_value(name))
        if found:
            objs = ordered(found)
            flavor = flavor_of(objs[0])
            if flavor is None:  # not a kind of any flavor: cannot be, as it was listed as one
                raise KubernetesError(f"job {name}: {objs[0].get('kind')} is not a workload kubetrain knows")
            return Located(label_value(name), namespace, flavor, res, objs)
    raise job_not_found(name, namespace)


def _pods_ahead(kube: Kube, namespace: str | None, selector: str) -> Ahead[list[JSON]]:
    """Pods by a label, listed on a thread while workloads are looked up or listed."""
    return Ahead(lambda: kube.list(PODS, namespace, label_selector=selector)[0], "pods-ahead")


def locate_with_pods(kube: Kube, caps: Capabilities, name: str, namespace: str) -> tuple[Located, list[JSON]]:
    """The job and its pods. A rendered job's pods carry its job label: they are listed while its workload is
    looked up (on a cluster far away, the lookup's round trips are hidden behind the list's); a document submitted
    as written, whose pods carry its controller's labels, has them listed once its root is known."""
    selector = f"{JOB_LABEL}={label_value(name)}"
    ahead = _pods_ahead(kube, namespace, selector)
    loc = locate(kube, caps, name, namespace)
    scope = loc.pods
    if scope.selector == selector and scope.owner_uid is None and loc.namespace == namespace:
        return loc, ahead.result()
    return loc, job_pods(kube, loc.name, loc.namespace, scope)


def job_pods(kube: Kube, name: str, namespace: str | None, scope: PodScope | None = None) -> list[JSON]:
    """The job's pods: by kubetrain's job label, or where ``scope`` says (a document submitted as written)."""
    scope = scope or PodScope(f"{JOB_LABEL}={label_value(name)}")
    items, _ = kube.list(PODS, namespace, label_selector=scope.selector or None)
    return scope.keep(kube, namespace or "", items)


def list_jobs(kube: Kube, caps: Capabilities, namespace: str | None, *,
              untouched_after: float | None = None) -> list[JobStatus]:
    """Every kubetrain job in ``namespace`` (None: every namespace), newest first, Pending causes the pods
    show included: one list per served workload kind + one of pods."""
    ahead = _pods_ahead(kube, namespace, f"{MANAGED_BY}={MANAGER}")  # kubetrain's pods, while the workloads are listed
    workloads: list[JSON] = []
    for res in workload_kinds(kube, caps):
        items, _ = kube.list(res, namespace, label_selector=JOB_LABEL)  # rendered, or as written: both labelled
        workloads += items
    pods = ahead.result()
    pods_by: dict[tuple[str, str], list[JSON]] = {}
    for pod in pods:
        pods_by.setdefault((meta(pod).get("namespace", ""), labels(pod).get(JOB_LABEL, "")), []).append(pod)
    by_job: dict[tuple[str, str], list[JSON]] = {}
    for obj in workloads:
        for job, objs in jobs_by_name([obj]).items():
            by_job.setdefault((meta(obj).get("namespace", ""), job), []).extend(objs)
    out = []
    for (job_ns, job), group in sorted(by_job.items()):
        objs = ordered(group)
        job_pod_list = pods_by.get((job_ns, job), [])
        flavor = flavor_of(objs[0])
        if flavor is not None and flavor.as_written:  # its pods carry its controller's labels, not kubetrain's
            job_pod_list = job_pods(kube, job, job_ns, pod_scope(flavor, meta(objs[0]).get("name", job), objs[0]))
        status = job_status(objs, job_pod_list, job_id=job, namespace=job_ns, flavor=flavor)
        out.append(pending_reason(status, diagnose(None, status, objs, job_pod_list, untouched_after=untouched_after,
                                                   flavor=flavor)))
    out.sort(key=lambda s: (s.created_at or 0.0, s.job_id), reverse=True)
    return out


__all__ = ["JobNotFound", "Located", "PodScope", "job_pods", "list_jobs", "locate", "locate_with_pods", "ordered",
           "pod_scope", "workload_kinds"]
