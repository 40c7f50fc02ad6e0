"""Discovery: which API groups the cluster serves, and where a kind lives (known kinds without a request)."""

from __future__ import annotations

from .errors import ApiError, KubernetesError
from .resources import Resource, known_resource
from .transport import JSON, Transport


class Discovery(Transport):
    """``/apis`` and ``/apis/<group>/<version>``, the latter cached."""

    _discovered: dict[str, list[JSON]]
    _known: dict[tuple[str, str], Resource]
    """Kinds beyond the core catalogue known without a request (the flavors' workloads)."""

    def api_groups(self) -> JSON:
        """``/apis``: the APIGroupList."""
        return self.request("GET", "/apis")

    def group_resources(self, group_version: str) -> list[JSON]:
        """``/apis/<group>/<version>``'s resources ([] when the version is not served); cached."""
        if group_version not in self._discovered:
            path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            try:
                out = self.request("GET", path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                out = {}
            self._discovered[group_version] = list(out.get("resources") or [])
        return self._discovered[group_version]

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """Where objects of ``kind`` live; known kinds without a request, others by discovery."""
        known = known_resource(api_version, kind) or self._known.get((api_version, kind))
        if known is not None:
            return known
        group, _, version = api_version.rpartition("/")
        for r in self.group_resources(api_version):
            if r.get("kind") == kind and "/" not in r.get("name", ""):
                return Resource(group, version, r["name"], kind, bool(r.get("namespaced", True)))
        raise KubernetesError(f"the cluster does not serve {kind} ({api_version})")


__all__ = ["Discovery"]
