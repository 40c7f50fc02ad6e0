"""Server-side defaulting of built-in objects: the fields a read-back shows that the client never sent.

Only fields a launcher reads back are filled: pod spec defaults and initial status (phase Pending,
qosClass), Job defaults (parallelism, completions, backoffLimit, completionMode, suspend, the
generated selector and template labels), Service clusterIP and port defaults, Namespace phase and
name label. All functions fill missing fields in place on an object the caller owns.
"""

from __future__ import annotations

import itertools
from typing import Any

from .validation import parse_quantity

_cluster_ips = itertools.count(10)


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    if "serviceAccountName" not in spec:
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    for section in ("initContainers", "containers"):
        for c in spec.get(section) or []:
            if not isinstance(c, dict):
                continue
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            if isinstance(c.get("image"), str):
                c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
            c.setdefault("resources", {})
            for port in c.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def qos_class(spec: dict[str, Any]) -> str:
    requests: list[dict[str, Any]] = []
    limits: list[dict[str, Any]] = []
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        requests.append({k: v for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")})
        limits.append({k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")})
    if not any(requests) and not any(limits):
        return "BestEffort"
    for req, lim in zip(requests, limits, strict=True):
        if set(lim) != {"cpu", "memory"}:
            return "Burstable"
        if any(parse_quantity(req[k]) != parse_quantity(lim[k]) for k in req):
            return "Burstable"
    return "Guaranteed"


def job(obj: dict[str, Any], uid: str, creating: bool) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("backoffLimitPerIndex") is None:
        spec.setdefault("backoffLimit", 6)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        if creating and not spec.get("manualSelector"):
            name = obj["metadata"].get("name", "")
            labels = template.setdefault("metadata", {}).setdefault("labels", {})
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
            )
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        if isinstance(template.get("spec"), dict):
            pod_spec(template["spec"])


def service(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if old is not None and not spec.get("clusterIP"):
        # Since 1.20 an update that omits the allocated IPs keeps them.
        for key in ("clusterIP", "clusterIPs"):
            if key in (old.get("spec") or {}):
                spec[key] = old["spec"][key]
    if not spec.get("clusterIP") and spec["type"] != "ExternalName":
        n = next(_cluster_ips)
        spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
    if spec.get("clusterIP"):
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


def apply(group: str, plural: str, obj: dict[str, Any], uid: str, old: dict[str, Any] | None) -> None:
    """Fill defaults of a built-in object about to be stored (``old`` is None on create)."""
    creating = old is None
    if (group, plural) == ("", "pods"):
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            pod_spec(spec)
            if creating and not obj.get("status"):
                obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
    elif (group, plural) == ("batch", "jobs"):
        job(obj, uid, creating)
        if creating:
            obj.setdefault("status", {})
    elif (group, plural) == ("", "services"):
        service(obj, old)
        if creating:
            obj.setdefault("status", {"loadBalancer": {}})
    elif (group, plural) == ("", "namespaces"):
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        if creating and not obj.get("status"):
            obj["status"] = {"phase": "Active"}
