"""Framework wiring: for one role, the env and argv of its replicas. Knows nothing of processes or Kubernetes.

The facts of a framework are its record (`contract.frameworks.RECORDS`); its wiring is the `wire` function of
the module named after it here (`frameworks/pytorch.py`), found by that name, so a new framework is its record
and its module, and no list here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from types import MappingProxyType

from ..contract.frameworks import RECORDS, Framework
from .common import ProcessWiring, RoleWiring, WireContext
from .topology import Topology, local_topology
from .values import Addrs, Idx, Value, is_static, resolve

Wire = Callable[[WireContext], RoleWiring]
"""Env and argv of one role's replicas."""


def _wire_in_module(framework: Framework) -> Wire:
    wire: Wire = import_module(f"{__name__}.{framework.value}").wire
    return wire


WIRING: Mapping[Framework, Wire] = MappingProxyType({name: _wire_in_module(name) for name in RECORDS})
"""Each framework's wiring, in the order of its records."""


def wire_of(framework: Framework | str) -> Wire:
    return WIRING[Framework(framework)]


__all__ = [
    "WIRING",
    "Addrs",
    "Idx",
    "ProcessWiring",
    "RoleWiring",
    "Topology",
    "Value",
    "Wire",
    "WireContext",
    "is_static",
    "local_topology",
    "resolve",
    "wire_of",
]
