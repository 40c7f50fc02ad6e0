"""Why replicas are Pending: one line per cause, with a hint.

Most causes are on the pods the watch already holds (no request): the scheduler's PodScheduled=False
message, a container waiting in ErrImagePull/ImagePullBackOff/CreateContainerConfigError. The rest
take a few reads, made only while something is Pending and unexplained by its pod:

- pods scheduled but stuck in ContainerCreating: their Warning events (FailedMount, FailedAttachVolume);
- replicas with no pod at all: the workload's Warning events (a ResourceQuota refusing the pods:
  FailedCreate ... exceeded quota), Kueue's Workload (QuotaReserved/Admitted conditions: not admitted
  yet, LocalQueue missing), and what the flavor's own objects tell (``Flavor.pending_causes``: Volcano's
  PodGroup, a gang not ready).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...contract.labels import KUEUE_QUEUE_LABEL
from ...status import JobPhase, JobStatus, ReplicaPhase
from .client.errors import ApiError
from .client.kube import Kube
from .client.resources import EVENTS, KUEUE_GROUP, Resource
from .diagnosis import Diagnosis, merge
from .flavors import Flavor, flavor_of
from .status_map import PodIndex, group_pods, main_container_status, pod_scheduling_problem, roles_of
from .workload import JSON, RoleInfo, conditions_of, labels, meta, true_condition

#: How many stuck pods get their events read (the same cause usually holds them all).
MAX_EVENT_READS = 2

_IMAGE_PULL = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
_CONFIG = {"CreateContainerConfigError", "CreateContainerError"}
_MOUNT_REASONS = {"FailedMount", "FailedAttachVolume", "FailedMapVolume"}


# --------------------------------------------------------------------------------------------- hints

_INSUFFICIENT = re.compile(r"Insufficient ([\w./-]+)")


def unschedulable_hint(message: str) -> str:
    found = sorted(set(_INSUFFICIENT.findall(message)))
    hints = []
    if found:
        what = ", ".join(found)
        hints.append(f"no node has enough free {what} for one replica: lower the request (spec.resources), "
                     f"wait for capacity, or add nodes that provide {what}")
    if "didn't match Pod's node affinity/selector" in message or "node(s) didn't match" in message:
        hints.append("no node matches the node selector/affinity (scheduling.nodePools, nodeType, "
                     "resources.capabilities, nodeSelector): check the node labels")
    if "untolerated taint" in message or "had taint" in message:
        hints.append("the nodes are tainted: add the matching tolerations (spec.tolerations)")
    if "unbound immediate PersistentVolumeClaims" in message or "persistentvolumeclaim" in message.lower():
        hints.append("a PersistentVolumeClaim is not bound: kubectl get pvc")
    if "Too many pods" in message:
        hints.append("the nodes run their maximum number of pods")
    if not hints:
        hints.append("the scheduler cannot place the pod: kubectl describe pod shows the full story")
    return "; ".join(hints)


def image_hint(reason: str, message: str) -> str:
    if reason == "InvalidImageName":
        return "the image reference is malformed: check spec.image"
    if reason == "ErrImageNeverPull":
        return "imagePullPolicy is Never and the image is not on the node"
    low = message.lower()
    if "unauthorized" in low or "denied" in low or "authentication" in low:
        return "the registry refused the credentials: add an imagePullSecret to the service account"
    if "not found" in low or "manifest unknown" in low:
        return "the image or tag does not exist: check spec.image"
    return "check the image name and tag (spec.image), that the registry is reachable, and pull secrets"


# --------------------------------------------------------------------------------------------- from pods


def from_pods(workloads: Sequence[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], *,
              flavor: Flavor | None = None, grouped: PodIndex | None = None,
              ) -> tuple[list[Diagnosis], list[Mapping[str, Any]], list[str]]:
    """Causes visible on the pods themselves; plus the pods stuck creating (their events may tell more) and
    the replicas that have no pod at all. ``flavor``: the job's (else read from its first workload object);
    ``grouped``: the pods by replica, when the caller has them."""
    if flavor is None and workloads:
        flavor = flavor_of(workloads[0])
    roles: list[RoleInfo] = roles_of(flavor, workloads)
    if grouped is None:
        grouped = group_pods(pods, roles)
    found: list[Diagnosis] = []
    creating: list[Mapping[str, Any]] = []
    missing: list[str] = []
    for info in roles:
        for i in range(info.replicas):
            name = f"{info.role}-{i}"
            pod = grouped.current.get((info.role, i))
            if pod is None:
                missing.append(name)
                continue
            if (pod.get("status") or {}).get("phase") != "Pending":
                continue
            sched = pod_scheduling_problem(pod)
            if sched is not None:
                message = sched.get("message") or sched.get("reason") or "not scheduled"
                if sched.get("reason") == "SchedulingGated":
                    found.append(Diagnosis("SchedulingGated", message, "a scheduling gate holds the pod (Kueue "
                                           "or another admission controller removes it when admitted)", [name]))
                else:
                    found.append(Diagnosis("Unschedulable", message, unschedulable_hint(message), [name]))
                continue
            waiting = _waiting(pod, info.container)
            if waiting is None:
                continue
            reason, message = waiting.get("reason") or "", waiting.get("message") or ""
            if reason in _IMAGE_PULL:
                found.append(Diagnosis("ImagePull", f"{reason}: {message}".rstrip(": "),
                                       image_hint(reason, message), [name]))
            elif reason in _CONFIG:
                found.append(Diagnosis("ContainerConfig", f"{reason}: {message}".rstrip(": "),
                                       "a Secret or ConfigMap the pod refers to is missing (env valueFrom, "
                                       "envFrom, mounts): create it or fix the reference", [name]))
            elif reason in ("ContainerCreating", "PodInitializing", ""):
                creating.append(pod)
    return merge(found), creating, missing


def _waiting(pod: Mapping[str, Any], container: str | None) -> JSON | None:
    status = pod.get("status") or {}
    for s in status.get("initContainerStatuses") or []:
        w = (s.get("state") or {}).get("waiting")
        if w and w.get("reason") not in (None, "PodInitializing"):
            return dict(w)
    cs = main_container_status(pod, container) or {}
    w = (cs.get("state") or {}).get("waiting")
    if w:
        return dict(w)
    if (pod.get("spec") or {}).get("nodeName") and not cs:
        return {"reason": "ContainerCreating"}
    return None


# --------------------------------------------------------------------------------------------- with reads


def _events(kube: Kube, namespace: str, kind: str, name: str) -> list[JSON]:
    items, _ = kube.list(EVENTS, namespace,
                         field_selector=f"involvedObject.kind={kind},involvedObject.name={name},type=Warning")
    items.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return items


def _mount_problems(kube: Kube, namespace: str, pods: Sequence[Mapping[str, Any]],
                    replicas: Mapping[str, str]) -> list[Diagnosis]:
    out: list[Diagnosis] = []
    for pod in pods[:MAX_EVENT_READS]:
        name = meta(pod).get("name", "")
        for ev in reversed(_events(kube, namespace, "Pod", name)):
            reason = ev.get("reason") or ""
            if reason in _MOUNT_REASONS:
                out.append(Diagnosis("Mount", f"{reason}: {ev.get('message') or ''}".rstrip(": "),
                                     "a volume cannot be mounted: check the PVC / Secret / ConfigMap / NFS source "
                                     "in spec.mounts (kubectl describe pod " + name + ")",
                                     [replicas.get(name, name)]))
                break
    return out


def _quota_problems(kube: Kube, namespace: str, workloads: Sequence[Mapping[str, Any]]) -> list[Diagnosis]:
    out: list[Diagnosis] = []
    for obj in workloads[:4]:
        for ev in reversed(_events(kube, namespace, str(obj.get("kind")), meta(obj).get("name", ""))):
            message = ev.get("message") or ""
            if ev.get("reason") in ("FailedCreate", "FailedCreatePodSandBox", "PodGroupPending") or "quota" in message:
                if "quota" in message:
                    out.append(Diagnosis("Quota", message, "the namespace's ResourceQuota refuses the pods: "
                                         f"kubectl describe resourcequota -n {namespace}; lower the requests or raise "
                                         "the quota"))
                else:
                    out.append(Diagnosis("FailedCreate", message, "the controller cannot create the pods: see "
                                         "the message (admission webhooks, LimitRange, service account)"))
                break
    return out


def _kueue_problems(kube: Kube, namespace: str, root: Mapping[str, Any], version: str) -> list[Diagnosis]:
    queue = labels(root).get(KUEUE_QUEUE_LABEL)
    if not queue:
        return []
    res = Resource(KUEUE_GROUP, version, "workloads", "Workload")
    uid = meta(root).get("uid", "")
    try:
        items, _ = kube.list(res, namespace, label_selector=f"kueue.x-k8s.io/job-uid={uid}")
        if not items:
            everything, _ = kube.list(res, namespace)
            items = [w for w in everything
                     if any(o.get("uid") == uid for o in meta(w).get("ownerReferences") or [])]
    except ApiError as exc:
        if exc.status in (403, 404):
            return []
        raise
    if not items:
        return [Diagnosis("Kueue", f"no Kueue Workload for it yet (queue {queue})",
                          "Kueue has not picked the job up: is the Kueue controller running, and does it manage "
                          "this kind (its integrations.frameworks)?")]
    wl = items[0]
    if true_condition(wl, "Admitted"):
        return []
    quota = next((c for c in conditions_of(wl) if c.get("type") == "QuotaReserved"), None)
    message = (quota or {}).get("message") or "not admitted yet"
    wl_name = meta(wl).get("name", "")
    low = message.lower()
    if "doesn't exist" in low or "not found" in low or "is inactive" in low:
        hint = f"LocalQueue {queue} is missing or inactive in namespace {namespace}: create it or set scheduling.queue"
    elif "insufficient" in low or "quota" in low:
        hint = (f"the ClusterQueue behind LocalQueue {queue} lacks quota for the whole job; it is admitted "
                f"when quota frees up (kubectl describe workload {wl_name})")
    else:
        hint = f"waiting in LocalQueue {queue} (kubectl describe workload {wl_name})"
    return [Diagnosis("Kueue", f"not admitted by queue {queue}: {message}", hint)]


# --------------------------------------------------------------------------------------------- nothing acts


NO_CONTROLLER = "NoController"
"""The cause of a job that no controller has acted on (no status, no pods) for the untouched time."""


def acted_on(workloads: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a controller has touched the job: a status written on one of its workload objects, or a pod."""
    if pods:
        return True
    return any(v not in (None, {}, [], "") for w in workloads for v in (w.get("status") or {}).values())


def untouched_for(status: JobStatus, workloads: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                  now: float | None = None) -> float | None:
    """For how long a job waiting on its controller has had nothing done to it (None: it has been acted on,
    or it is not waiting on its controller: ended, suspended, held by Kueue)."""
    if status.phase is not JobPhase.PENDING or status.reason == "WaitingForAdmission" or status.created_at is None:
        return None
    if not workloads or acted_on(workloads, pods):
        return None
    return max(0.0, (time.time() if now is None else now) - status.created_at)


def untouched(status: JobStatus, workloads: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
              after: float, now: float | None = None, *, flavor: Flavor | None = None) -> Diagnosis | None:
    """The job's controller has not acted on it for ``after`` seconds: say so, and where to look."""
    age = untouched_for(status, workloads, pods, now)
    if age is None or age < after:
        return None
    root = next((w for w in workloads if not meta(w).get("ownerReferences")), workloads[0])
    flavor = flavor if flavor is not None else flavor_of(root)
    controller = flavor.controller if flavor is not None else None
    kind = str(root.get("kind") or "object")
    what = controller.what if controller is not None else f"the controller of {kind}"
    where = controller.hint() if controller is not None else "kubectl get pods -A"
    if flavor is not None and flavor.as_written:
        hint = (f"kubetrain submitted the {kind} as written, for its own controller: `kubetrain run FILE --convert` "
                "runs the file without it, on the flavors this cluster runs")
    elif controller is not None and controller.builtin:
        hint = "the Job controller is part of kube-controller-manager: is the cluster's control plane healthy?"
    else:
        hint = "`--flavor job` needs nothing but Kubernetes (see `kubetrain run --dry-run=server` for what runs here)"
    message = f"no controller has acted on this {kind} for {age:.0f} s: is {what} installed and running? ({where})"
    return Diagnosis(NO_CONTROLLER, message, hint, [r.name for r in status.replicas])


def diagnose(
    kube: Kube | None,
    status: JobStatus,
    workloads: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    *,
    kueue_version: str | None = None,
    untouched_after: float | None = None,
    flavor: Flavor | None = None,
    grouped: PodIndex | None = None,
) -> list[Diagnosis]:
    """Every cause holding Pending replicas (empty when none is Pending). ``kube=None``: pods only.
    ``untouched_after``: a job no controller has acted on for that many seconds is said to be (NoController),
    and nothing else is looked up for it (nothing else can be the cause yet). ``flavor``: the job's, when the
    caller knows it; else read once from its root object. ``grouped``: the pods by replica, when the caller has
    them (grouping 10,000 pods once is enough)."""
    if status.phase.is_terminal or not any(r.phase is ReplicaPhase.PENDING for r in status.replicas):
        return []
    if not workloads:
        return []
    root = next((w for w in workloads if not meta(w).get("ownerReferences")), workloads[0])
    flavor = flavor if flavor is not None else flavor_of(root)
    if untouched_after is not None:
        idle = untouched(status, workloads, pods, untouched_after, flavor=flavor)
        if idle is not None:
            return [idle]
    roles = roles_of(flavor, workloads)
    if grouped is None:
        grouped = group_pods(pods, roles)
    found, creating, missing = from_pods(workloads, pods, flavor=flavor, grouped=grouped)
    if kube is None:
        return found
    namespace = status.namespace or meta(workloads[0]).get("namespace") or "default"
    replica_of = {}
    for (role, index), pod in grouped.current.items():
        replica_of[meta(pod).get("name", "")] = f"{role}-{index}"
    extra: list[Diagnosis] = []
    if creating:
        extra += _mount_problems(kube, namespace, creating, replica_of)
    if kueue_version and labels(root).get(KUEUE_QUEUE_LABEL) and (missing or status.reason == "WaitingForAdmission"):
        extra += _kueue_problems(kube, namespace, root, kueue_version)
    if flavor is not None:
        extra += flavor.pending_causes(kube, namespace, root)
    if missing and not extra and status.reason != "WaitingForAdmission":
        extra += _quota_problems(kube, namespace, workloads)
    pending = [r.name for r in status.replicas if r.phase is ReplicaPhase.PENDING]
    for d in extra:
        if not d.replicas:
            d.replicas = list(missing) if d.cause in ("Quota", "FailedCreate") and missing else pending
    return merge([*found, *extra])


__all__ = ["NO_CONTROLLER", "Diagnosis", "acted_on", "diagnose", "from_pods", "image_hint", "unschedulable_hint",
           "untouched", "untouched_for"]
