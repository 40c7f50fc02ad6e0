"""Where replicas are reachable: explicit ports on 127.0.0.1 locally, stable DNS names on Kubernetes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Topology:
    """Replica addresses per role. `port_of` maps (role, index) to a port; `host_pattern` has `{role}` and
    `{index}` (e.g. "demo-{role}-{index}.demo") or is a fixed host."""

    roles: Mapping[str, int]
    """Replicas per role, in numbering order."""
    host_pattern: str = "127.0.0.1"
    ports: Mapping[tuple[str, int], int] = field(default_factory=dict)
    """Port of each replica (locally, every replica has its own)."""
    role_ports: Mapping[str, int] = field(default_factory=dict)
    """Port shared by every replica of a role (on Kubernetes, each pod has its own IP)."""
    role_names: Mapping[str, str] = field(default_factory=dict)
    """Role → the name its host names carry where it differs from the role (a Volcano task named as the job
    file names it)."""

    def name_of(self, role: str) -> str:
        return self.role_names.get(role, role)

    def host(self, role: str, index: int) -> str:
        return self.host_pattern.format(role=self.name_of(role), index=index)

    def port(self, role: str, index: int) -> int:
        if (role, index) in self.ports:
            return self.ports[(role, index)]
        return self.role_ports[role]

    def address(self, role: str, index: int) -> str:
        return f"{self.host(role, index)}:{self.port(role, index)}"

    def addresses(self, role: str) -> list[str]:
        return [self.address(role, i) for i in range(self.roles[role])]

    @property
    def uniform(self) -> bool:
        """Addresses follow one pattern per role, so a replica can compute them from its index."""
        return not self.ports

    def cluster_json(self) -> str:
        """KUBETRAIN_CLUSTER: explicit lists, or `{count, address}` patterns whose size does not grow."""
        if self.uniform and "{index}" in self.host_pattern:
            data: dict[str, object] = {
                role: {
                    "count": n,
                    "address": self.host_pattern.format(role=self.name_of(role), index="{index}")
                    + f":{self.role_ports[role]}",
                }
                for role, n in self.roles.items()
            }
        else:
            data = {role: self.addresses(role) for role in self.roles}
        return json.dumps(data, separators=(",", ":"))


def local_topology(roles: Mapping[str, int], ports: list[int]) -> Topology:
    """Every replica on 127.0.0.1 with its own port, taken in order from `ports`."""
    keys = [(role, i) for role, n in roles.items() for i in range(n)]
    if len(ports) < len(keys):
        raise ValueError(f"need {len(keys)} ports, got {len(ports)}")
    return Topology(roles=dict(roles), ports=dict(zip(keys, ports, strict=False)))
