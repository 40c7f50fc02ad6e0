"""The frameworks as the job model names them. Their facts are one record each, in `contract.frameworks`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..contract.frameworks import RECORDS, Framework

ROLES: Mapping[Framework, tuple[str, ...] | None] = MappingProxyType(
    {name: record.roles for name, record in RECORDS.items()}
)
"""Roles each framework accepts, in the order replicas are numbered and shown. `None`: any DNS-1123 name."""

__all__ = ["ROLES", "Framework"]
