"""Is an engine's controller alive? What a cluster serves (its CRDs) says only that it was installed once: after a
partial install, a failed upgrade or a controller in CrashLoopBackOff the API is served and nothing acts on a job.

For each engine (:class:`~.flavors.base.Controller`), in this order, the first evidence found decides:

1. **Its Deployments** in the namespaces its install uses (``jobset-system/jobset-controller-manager``,
   ``volcano-system/volcano-controllers`` and ``volcano-scheduler``, ``kubeflow/training-operator``,
   ``mpi-operator/mpi-operator``; a Helm release's ``<release>-<name>`` too): alive when every one has a ready
   replica (``status.readyReplicas``), dead when one has none.
2. **Its leader-election Lease** there (the one whose holder is one of those Deployments' pods): alive when
   renewed within twice its ``leaseDurationSeconds`` (at least 30 s), dead when older.
3. **What it wrote on the objects it handles** (the newest object of its kinds in the job's namespace that is
   older than the untouched time): alive when that object has a status, dead when it has none.

Nothing readable (forbidden, nothing installed where looked, no object yet): unknown. The Job controller is
Kubernetes' own: alive wherever the API server answers. Reads that are forbidden are said in the evidence.

What kubetrain needs to read for it: ``get``/``list`` on ``apps/v1`` deployments and ``coordination.k8s.io/v1``
leases in those namespaces, and ``list`` on the kinds in the job's namespace (which it needs anyway). The answer
is cached per cluster and context for a short time (``ttl``; a file in the state directory), so a CLI verb does
not pay the reads each time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ...contract.env_names import HOME
from ...contract.logs import parse_time
from .client.errors import ApiError
from .client.kube import Kube
from .client.resources import Resource
from .flavors.base import Controller
from .workload import JSON, meta

DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")

State = Literal["live", "dead", "unknown"]

#: A Lease renewed longer ago than this (or twice its duration, if more) is a leader that stopped.
LEASE_STALE = 30.0


@dataclass(frozen=True)
class Liveness:
    """Whether an engine's controller shows signs of life, and what says so."""

    state: State
    evidence: str

    @property
    def live(self) -> bool:
        return self.state == "live"


def _ready(dep: Mapping[str, Any]) -> tuple[int, int]:
    status = dep.get("status") or {}
    want = int((dep.get("spec") or {}).get("replicas", 1) or 0)
    return int(status.get("readyReplicas") or 0), want


def _deployments(kube: Kube, controller: Controller, notes: list[str]) -> Liveness | None:
    for ns in controller.namespaces:
        found: list[JSON] = []
        for name in controller.deployments:
            try:
                dep = kube.find(DEPLOYMENTS, name, ns)
                if dep is None:  # a Helm release names it <release>-<name>
                    items, _ = kube.list(DEPLOYMENTS, ns)
                    dep = next((d for d in items if meta(d).get("name", "").endswith("-" + name)), None)
            except ApiError as exc:
                if exc.status == 403:
                    notes.append(f"not allowed to read deployments in {ns}")
                    break
                if exc.status == 404:  # the namespace is not there
                    break
                raise
            if dep is not None:
                found.append(dep)
        if not found:
            continue
        for dep in found:
            ready, want = _ready(dep)
            if ready < 1:
                return Liveness("dead", f"Deployment {ns}/{meta(dep).get('name')} has {ready}/{want} ready replicas")
        names = ", ".join(f"{ns}/{meta(d).get('name')} {_ready(d)[0]}/{_ready(d)[1]}" for d in found)
        return Liveness("live", f"Deployment {names} ready")
    return None


def _leases(kube: Kube, controller: Controller, now: float, notes: list[str]) -> Liveness | None:
    for ns in controller.namespaces:
        try:
            items, _ = kube.list(LEASES, ns)
        except ApiError as exc:
            if exc.status == 403:
                notes.append(f"not allowed to read leases in {ns}")
                continue
            if exc.status == 404:
                continue
            raise
        for lease in items:
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if not any(name in holder for name in controller.deployments):
                continue
            renewed = parse_time(spec.get("renewTime"))
            if renewed is None:
                continue
            age = max(0.0, now - renewed)
            stale = max(LEASE_STALE, 2.0 * float(spec.get("leaseDurationSeconds") or 15))
            where = f"Lease {ns}/{meta(lease).get('name')}"
            if age <= stale:
                return Liveness("live", f"{where} renewed {age:.0f} s ago")
            return Liveness("dead", f"{where} last renewed {age:.0f} s ago (its holder stopped)")
    return None


def _objects(kube: Kube, kinds: Sequence[Resource], namespace: str, now: float, untouched_after: float,
             notes: list[str]) -> Liveness | None:
    newest: JSON | None = None
    newest_at = 0.0
    for res in kinds:
        try:
            items, _ = kube.list(res, namespace)
        except ApiError as exc:
            if exc.status in (403, 404):
                continue
            raise
        for obj in items:
            created = parse_time(meta(obj).get("creationTimestamp")) or 0.0
            if now - created >= untouched_after and created >= newest_at:
                newest, newest_at = obj, created
    if newest is None:
        return None
    what = f"{newest.get('kind')} {namespace}/{meta(newest).get('name')}"
    if any(v not in (None, {}, [], "") for v in (newest.get("status") or {}).values()):
        return Liveness("live", f"{what} has a status its controller wrote")
    return Liveness("dead", f"{what}, created {now - newest_at:.0f} s ago, has no status: nothing acted on it")


def check(kube: Kube, controller: Controller, kinds: Sequence[Resource], namespace: str, *,
          untouched_after: float = 30.0, now: float | None = None) -> Liveness:
    """The liveness of ``controller`` (module docstring), whose workloads are ``kinds``."""
    if controller.builtin:
        return Liveness("live", "part of Kubernetes")
    now = time.time() if now is None else now
    notes: list[str] = []
    found = (_deployments(kube, controller, notes) or _leases(kube, controller, now, notes)
             or _objects(kube, kinds, namespace, now, untouched_after, notes))
    if found is not None:
        return found
    where = ", ".join(controller.namespaces) or "the usual namespaces"
    said = "; ".join(dict.fromkeys(notes))
    return Liveness("unknown", f"no Deployment or Lease of it found in {where}" + (f" ({said})" if said else "")
                    + f", and no {'/'.join(r.kind for r in kinds)} old enough in {namespace} to tell")


# --------------------------------------------------------------------------------------------- the cache


def cache_file() -> Path:
    """``$KUBETRAIN_HOME/cache/liveness.json``, else ``$XDG_CACHE_HOME/kubetrain/liveness.json``."""
    home = os.environ.get(HOME)
    if home:
        return Path(home) / "cache" / "liveness.json"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kubetrain" / "liveness.json"


class LivenessCache:
    """Answers per (cluster, context, engine), kept ``ttl`` seconds in memory and in :func:`cache_file` (so the
    next CLI verb reuses them). A cache that cannot be read or written is no cache, never an error."""

    def __init__(self, context: str, ttl: float) -> None:
        self.context = context
        self.ttl = ttl
        self._memory: dict[str, tuple[float, Liveness]] = {}

    def get(self, engine: str, now: float | None = None) -> Liveness | None:
        if self.ttl <= 0:
            return None
        now = time.time() if now is None else now
        hit = self._memory.get(engine)
        if hit is None:
            entry = self._read().get(self.context, {}).get(engine)
            if isinstance(entry, dict):
                try:
                    hit = float(entry["at"]), Liveness(entry["state"], str(entry["evidence"]))
                except (KeyError, TypeError, ValueError):
                    hit = None
        if hit is None or now - hit[0] > self.ttl or now < hit[0]:
            return None
        self._memory[engine] = hit
        return hit[1]

    def put(self, engine: str, value: Liveness, now: float | None = None) -> None:
        if self.ttl <= 0:
            return
        now = time.time() if now is None else now
        self._memory[engine] = (now, value)
        data = self._read()
        data.setdefault(self.context, {})[engine] = {"at": now, **asdict(value)}
        path = cache_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass

    @staticmethod
    def _read() -> dict[str, Any]:
        try:
            data = json.loads(cache_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}




def no_sign_of_life(engine: Any, seen: Liveness, label: str | None = None) -> str:
    """The warning for an engine asked for by name (a flavor, or a document's own kind: ``label``) whose
    controller shows no sign of life."""
    what = engine.controller.what if engine.controller is not None else "its controller"
    label = label or f"the {engine.name} flavor"
    if seen.state == "dead":
        return (f"{label}: {what} shows no sign of life ({seen.evidence}): the job may wait for ever; kubetrain "
                "says so if nothing acts on it")
    return (f"{label}: kubetrain cannot tell whether {what} runs ({seen.evidence}); it says so if nothing acts on "
            "the job")


__all__ = ["DEPLOYMENTS", "LEASES", "LEASE_STALE", "Liveness", "LivenessCache", "cache_file", "check",
           "no_sign_of_life"]
