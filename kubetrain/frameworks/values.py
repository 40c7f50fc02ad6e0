"""Env values that depend on which replica reads them, kept symbolic so one template serves every replica.

Locally the plan evaluates them per replica; on Kubernetes the render turns them into a few lines of
POSIX shell run at container start (from the Job completion index), so a manifest does not grow with
the replica count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .topology import Topology


@dataclass(frozen=True)
class Idx:
    """`scale * part + offset`, where part is the replica's index within its role, divided by `div` (floor) and
    taken modulo `mod` when `mod` is set: a JobSet pod's Job index is `index // parallelism`, its completion
    index `index % parallelism`."""

    scale: int = 1
    offset: int = 0
    div: int = 1
    mod: int = 0

    def at(self, index: int) -> int:
        part = index // self.div
        if self.mod:
            part %= self.mod
        return self.scale * part + self.offset


@dataclass(frozen=True)
class Addrs:
    """The JSON array of a role's `host:port` addresses (for TF_CONFIG's cluster)."""

    role: str


Piece = str | Idx | Addrs
Value = str | tuple[Piece, ...]


def is_static(value: Value) -> bool:
    return isinstance(value, str) or all(isinstance(p, str) for p in value)


def resolve(value: Value, index: int, topology: Topology) -> str:
    """The concrete text of `value` for replica `index`."""
    if isinstance(value, str):
        return value
    out = []
    for piece in value:
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece, Idx):
            out.append(str(piece.at(index)))
        else:
            out.append(json.dumps(topology.addresses(piece.role)))
    return "".join(out)
