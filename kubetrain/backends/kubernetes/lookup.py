"""Finding a job on the cluster by name: its workload objects (root first), its flavor, its pods.

A job is named by its ``metadata.name``, the ``kubetrain.dev/job`` label of all its objects, within a
namespace. Its workload kind is not known in advance: each kind the cluster serves is listed in turn,
the likeliest first (:func:`~.flavors.lookup_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...contract.labels import JOB_LABEL, MANAGED_BY, MANAGER
from ...contract.naming import label_value
from ...status import JobStatus
from .capabilities import Capabilities
from .client.errors import KubernetesError
from .client.kube import Kube
from .client.resources import PODS, Resource
from .describe import pending_reason
from .diagnose import diagnose
from .flavors import Flavor, flavor_of, lookup_order
from .status_map import job_status, jobs_by_name
from .workload import JSON, is_root, labels, meta


class JobNotFound(KubernetesError, LookupError):
    """No kubetrain job of that name in the namespace (a `LookupError`, as on every backend)."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f"no kubetrain job {name} in namespace {namespace} (kubetrain list --backend kubernetes "
                         f"-n {namespace})")


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


def ordered(workloads: Sequence[JSON]) -> list[JSON]:
    """Workload objects, the root (the one nobody owns) first."""
    return sorted(workloads, key=lambda o: (not is_root(o), meta(o).get("name", "")))


def workload_kinds(kube: Kube, caps: Capabilities) -> list[Resource]:
    """The workload kinds this cluster serves, the likeliest first (a lookup lists them in turn)."""
    return [res for flavor in lookup_order() for res in flavor.served_resources(kube, caps)]


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
    raise JobNotFound(name, namespace)


def job_pods(kube: Kube, name: str, namespace: str | None) -> list[JSON]:
    items, _ = kube.list(PODS, namespace, label_selector=f"{JOB_LABEL}={label_value(name)}")
    return items


def list_jobs(kube: Kube, caps: Capabilities, namespace: str | None) -> list[JobStatus]:
    """Every kubetrain job in ``namespace`` (None: every namespace), newest first, Pending causes the pods
    show included: one list per served workload kind + one of pods."""
    selector = f"{MANAGED_BY}={MANAGER}"
    workloads: list[JSON] = []
    for res in workload_kinds(kube, caps):
        items, _ = kube.list(res, namespace, label_selector=selector)
        workloads += items
    pods, _ = kube.list(PODS, namespace, label_selector=selector)
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
        status = job_status(objs, job_pod_list, job_id=job, namespace=job_ns)
        out.append(pending_reason(status, diagnose(None, status, objs, job_pod_list)))
    out.sort(key=lambda s: (s.created_at or 0.0, s.job_id), reverse=True)
    return out


__all__ = ["JobNotFound", "Located", "job_pods", "list_jobs", "locate", "ordered", "workload_kinds"]
