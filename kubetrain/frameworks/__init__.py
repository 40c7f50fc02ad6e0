"""Framework wiring: for one role, the env and argv of its replicas. Knows nothing of processes or Kubernetes."""

from __future__ import annotations

from ..jobspec import Framework
from . import deepspeed, generic, jax, mpi, pytorch, tensorflow
from .common import FrameworkSupport, KubeflowKind, ProcessWiring, RoleWiring, WireContext
from .topology import Topology, local_topology
from .values import Addrs, Idx, Value, is_static, resolve

FRAMEWORKS: dict[Framework, FrameworkSupport] = {
    support.name: support
    for support in (pytorch.SUPPORT, tensorflow.SUPPORT, deepspeed.SUPPORT, mpi.SUPPORT, jax.SUPPORT, generic.SUPPORT)
}
"""The framework registry: adding one is a module with its `SUPPORT` and a line here (docs/design.md)."""


def support_of(framework: Framework | str) -> FrameworkSupport:
    return FRAMEWORKS[Framework(framework)]


__all__ = [
    "FRAMEWORKS",
    "Addrs",
    "FrameworkSupport",
    "Idx",
    "KubeflowKind",
    "ProcessWiring",
    "RoleWiring",
    "Topology",
    "Value",
    "WireContext",
    "is_static",
    "local_topology",
    "resolve",
    "support_of",
]
