"""Where kinds live in the API, and the catalogue of the core kinds kubetrain creates or reads.

The workload kinds of each flavor (JobSet, Volcano Job, the Kubeflow kinds) belong to the flavor
(:mod:`..flavors`); a client is given them when it is made (``Kube(..., known=...)``), so creating them
needs no discovery request either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """A kind the backend talks to: where it lives in the API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if sub:
                base += f"/{sub}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
JOBS = Resource("batch", "v1", "jobs", "Job")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
KUEUE_GROUP = "kueue.x-k8s.io"

CORE: tuple[Resource, ...] = (PODS, SERVICES, CONFIGMAPS, EVENTS, SECRETS, SERVICE_ACCOUNTS,
                              PERSISTENT_VOLUME_CLAIMS, JOBS, ROLES, ROLE_BINDINGS)
"""The core kinds: what a render produces beside a flavor's workload, and what the backend reads."""


def catalogue(resources: Iterable[Resource]) -> dict[tuple[str, str], Resource]:
    """(apiVersion, kind) → resource."""
    return {(r.api_version, r.kind): r for r in resources}


_CORE = catalogue(CORE)


def known_resource(api_version: str, kind: str) -> Resource | None:
    """A core kind by apiVersion and kind (no request)."""
    return _CORE.get((api_version, kind))


__all__ = [
    "CONFIGMAPS",
    "CORE",
    "EVENTS",
    "JOBS",
    "KUEUE_GROUP",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "Resource",
    "catalogue",
    "known_resource",
]
