"""A pod as kubetrain keeps it while it follows a job: the fields that status, Pending diagnosis, describe and
the log streams read, and nothing else. Plain functions over dicts, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JSON = dict[str, Any]

_POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations", "creationTimestamp",
                 "deletionTimestamp", "ownerReferences")
_POD_STATUS = ("phase", "reason", "message", "startTime", "conditions")
_CONTAINER_STATUS = ("name", "state", "lastState", "restartCount", "ready", "started")


def pod_essentials(pod: Mapping[str, Any]) -> JSON:
    """The part of a pod that kubetrain's status, Pending diagnosis, describe and log streams read, and nothing
    else: a follower of 10,000 replicas keeps 10,000 of these, where a whole pod (its spec's containers with
    their env, volumes, tolerations, managedFields) is ten times the size. What is read from a pod is what this
    keeps (tests compare every verb's answer from both)."""
    md = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    out: JSON = {"apiVersion": pod.get("apiVersion", "v1"), "kind": pod.get("kind", "Pod"),
                 "metadata": {k: md[k] for k in _POD_METADATA if k in md}}
    kept_spec: JSON = {"containers": [{"name": c.get("name")} for c in spec.get("containers") or []]}
    if spec.get("nodeName"):
        kept_spec["nodeName"] = spec["nodeName"]
    out["spec"] = kept_spec
    kept_status: JSON = {k: status[k] for k in _POD_STATUS if k in status}
    for key in ("containerStatuses", "initContainerStatuses"):
        if key in status:
            kept_status[key] = [{k: cs[k] for k in _CONTAINER_STATUS if k in cs} for cs in status[key] or []]
    out["status"] = kept_status
    return out


def same_essentials(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two versions of a pod (both :func:`pod_essentials`) say the same to kubetrain: a change of the
    resourceVersion alone (a field kubetrain does not read changed, an IP, a label's neighbour) is no change."""
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    if any(ma.get(k) != mb.get(k) for k in _POD_METADATA if k != "resourceVersion"):
        return False
    return a.get("spec") == b.get("spec") and a.get("status") == b.get("status")


__all__ = ["pod_essentials", "same_essentials"]
