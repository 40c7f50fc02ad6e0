"""Framework wiring: for one role, the env and argv of its replicas. Knows nothing of processes or Kubernetes."""

from __future__ import annotations

from collections.abc import Callable

from ..jobspec import Framework
from . import deepspeed, generic, jax, mpi, pytorch, tensorflow
from .common import ProcessWiring, RoleWiring, WireContext
from .topology import Topology, local_topology
from .values import Addrs, Idx, Value, is_static, resolve

WIRE: dict[Framework, Callable[[WireContext], RoleWiring]] = {
    Framework.PYTORCH: pytorch.wire,
    Framework.TENSORFLOW: tensorflow.wire,
    Framework.DEEPSPEED: deepspeed.wire,
    Framework.MPI: mpi.wire,
    Framework.JAX: jax.wire,
    Framework.GENERIC: generic.wire,
}

DEFAULT_PORTS: dict[Framework, int] = {
    Framework.PYTORCH: pytorch.DEFAULT_PORT,
    Framework.DEEPSPEED: pytorch.DEFAULT_PORT,
    Framework.TENSORFLOW: tensorflow.DEFAULT_PORT,
    Framework.JAX: jax.DEFAULT_PORT,
    Framework.MPI: 2222,
    Framework.GENERIC: 29500,
}

__all__ = [
    "DEFAULT_PORTS",
    "WIRE",
    "Addrs",
    "Idx",
    "ProcessWiring",
    "RoleWiring",
    "Topology",
    "Value",
    "WireContext",
    "is_static",
    "local_topology",
    "resolve",
]
