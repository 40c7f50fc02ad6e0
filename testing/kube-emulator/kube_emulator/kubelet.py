"""Pod status the way the scheduler and kubelet write it, for tests that play those parts.

:func:`apply_phase` turns "this pod is now Running / Failed with exit code 137 / unschedulable"
into the status fields a launcher reads: ``phase``, ``conditions`` (PodScheduled, Initialized,
ContainersReady, Ready, PodReadyToStartContainers), ``containerStatuses[]`` with
``state``/``lastState`` and ``restartCount``, ``podIP``/``podIPs``, ``hostIP``, ``startTime``, and
``spec.nodeName`` once scheduled.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
DEFAULT_UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."

_ips = itertools.count(2)


def next_pod_ip() -> str:
    n = next(_ips)
    return f"10.244.{n // 250}.{n % 250 + 1}"


def _container_id() -> str:
    return "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex


def _set_condition(
    status: dict[str, Any], ctype: str, value: bool, now: str, reason: str | None = None, message: str | None = None
) -> None:
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    new: dict[str, Any] = {"type": ctype, "status": "True" if value else "False", "lastTransitionTime": now}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    for i, cond in enumerate(conditions):
        if cond.get("type") == ctype:
            if cond.get("status") == new["status"]:
                new["lastTransitionTime"] = cond.get("lastTransitionTime", now)
            conditions[i] = new
            return
    conditions.append(new)


def _terminated(
    exit_code: int, reason: str | None, message: str | None, started: str, now: str, container_id: str
) -> dict[str, Any]:
    term: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
        "startedAt": started,
        "finishedAt": now,
        "containerID": container_id,
    }
    if message:
        term["message"] = message
    return term


def apply_phase(
    pod: dict[str, Any],
    phase: str,
    *,
    now: str,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    restart: bool = False,
    container: str | None = None,
    pod_reason: str | None = None,
    node_name: str | None = None,
    pod_ip: Callable[[], str] = next_pod_ip,
) -> list[str]:
    """Rewrite ``pod`` (owned by the caller) to ``phase``; returns the containers that restarted.

    ``reason``/``message``/``exit_code`` describe the container state (waiting reason, terminated
    reason and code); for ``Pending`` with ``reason="Unschedulable"`` they describe the PodScheduled
    condition instead. ``restart=True`` means the container terminated (with ``exit_code``, default
    1) and was started again: its state moves to ``lastState`` and ``restartCount`` goes up.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, not {phase!r}")
    spec = pod.setdefault("spec", {})
    status = pod.setdefault("status", {})
    names = [c["name"] for c in spec.get("containers") or []]
    if container is not None and container not in names:
        raise ValueError(f"pod {pod['metadata']['name']} has no container {container!r} (has {names})")
    targets = [container] if container else names
    images = {c["name"]: c.get("image", "") for c in spec.get("containers") or []}

    if phase == "Pending" and reason == "Unschedulable":
        status["phase"] = "Pending"
        _set_condition(status, "PodScheduled", False, now, "Unschedulable", message or DEFAULT_UNSCHEDULABLE)
        return []

    if node_name or not spec.get("nodeName"):
        spec["nodeName"] = node_name or "node-0"
    status["hostIP"] = "172.18.0.2"
    status["hostIPs"] = [{"ip": "172.18.0.2"}]
    status.setdefault("startTime", now)
    status["phase"] = phase
    if pod_reason:
        status["reason"] = pod_reason
        if message:
            status["message"] = message
    else:
        status.pop("reason", None)
        status.pop("message", None)
    if phase in ("Running", "Succeeded", "Failed") and not status.get("podIP"):
        ip = pod_ip()
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]

    by_name = {cs["name"]: cs for cs in status.get("containerStatuses") or []}
    restarted = []
    statuses = []
    for name in names:
        cs = by_name.get(name) or {
            "name": name,
            "image": images[name],
            "imageID": "",
            "containerID": _container_id(),
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {},
        }
        cs = dict(cs)
        is_target = name in targets
        if not is_target and name in by_name:
            statuses.append(cs)
            continue
        code = exit_code if is_target else None
        why = reason if is_target else None
        started = (cs["state"].get("running") or {}).get("startedAt", status["startTime"])
        if is_target and restart:
            crash = 1 if exit_code is None else exit_code
            cs["lastState"] = {"terminated": _terminated(crash, reason, message, started, now, cs["containerID"])}
            cs["restartCount"] = cs.get("restartCount", 0) + 1
            cs["containerID"] = _container_id()
            restarted.append(name)
            # The termination was described by lastState; the new instance starts fresh.
            code, why = None, None
        if phase == "Pending":
            waiting: dict[str, Any] = {"reason": why or ("CrashLoopBackOff" if restart else "ContainerCreating")}
            if message and is_target and not restart:
                waiting["message"] = message
            cs.update(state={"waiting": waiting}, ready=False, started=False)
        elif phase == "Running":
            if "running" not in cs["state"] or (is_target and restart):
                cs["state"] = {"running": {"startedAt": now}}
            cs.update(ready=True, started=True)
        elif phase in ("Succeeded", "Failed"):
            default = 0 if phase == "Succeeded" else 1
            term = _terminated(
                default if code is None else code, why, message if is_target else None, started, now, cs["containerID"]
            )
            cs.update(state={"terminated": term}, ready=False, started=False)
        statuses.append(cs)
    status["containerStatuses"] = statuses

    ready = phase == "Running"
    not_ready = {"Pending": "ContainersNotReady", "Succeeded": "PodCompleted", "Failed": "PodFailed"}.get(phase)
    unready = [cs["name"] for cs in statuses if not cs["ready"]]
    unready_msg = f"containers with unready status: [{' '.join(unready)}]" if phase == "Pending" else None
    _set_condition(status, "PodReadyToStartContainers", phase != "Pending", now)
    _set_condition(status, "Initialized", True, now, "PodCompleted" if phase == "Succeeded" else None)
    _set_condition(status, "Ready", ready, now, None if ready else not_ready, unready_msg)
    _set_condition(status, "ContainersReady", ready, now, None if ready else not_ready, unready_msg)
    _set_condition(status, "PodScheduled", True, now)
    return restarted
