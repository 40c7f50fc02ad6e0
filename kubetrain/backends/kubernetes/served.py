"""`Served`: the API groups and versions a cluster serves, as one request (``/apis``) tells them.

A record with no registry in it, so that the flavors can ask it whether their group is served: the questions
that need every flavor (which can run here, which to pick) are :class:`.capabilities.Capabilities`', above
the flavors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .client.resources import KUEUE_GROUP


@dataclass
class Served:
    """API groups → served versions (and each group's preferred version)."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    preferred: dict[str, str] = field(default_factory=dict)

    def serves(self, group: str, version: str | None = None) -> bool:
        versions = self.groups.get(group)
        if versions is None:
            return False
        return version is None or version in versions

    @property
    def kueue(self) -> bool:
        return KUEUE_GROUP in self.groups

    @property
    def kueue_version(self) -> str | None:
        return self.preferred.get(KUEUE_GROUP)


__all__ = ["Served"]
