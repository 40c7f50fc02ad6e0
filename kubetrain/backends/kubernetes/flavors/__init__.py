"""The flavors: one `Flavor` object per Kubernetes engine kubetrain renders for and drives.

`FLAVORS` is the one list of them, the default first (`kubetrain.contract.choices.FLAVORS` repeats the
names for the CLI's parser, and a test holds the two equal). Adding a flavor is a module here defining
its `FLAVOR` (a `base.Flavor` subclass: API, features, render, status, control) and a line below; the
CLI's choices come from `contract.choices`.

The flavor modules are light (stdlib, `kubetrain.contract`, `kubetrain.status`): they import the render
helpers, which pull in pydantic and the planner, only when they render.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ....contract.choices import BACKEND_ALIASES, BACKENDS
from ....contract.errors import UsageError
from ....contract.labels import AS_WRITTEN_ANNOTATION, FLAVOR_ANNOTATION
from ..client.resources import Resource
from ..workload import annotations_of
from . import job, jobset, kubeflow, volcano
from .base import Controller, Features, Flavor, FlavorUnavailable
from .written import WRITTEN, written_kind, written_of

FLAVORS: dict[str, Flavor] = {f.name: f for f in (job.FLAVOR, jobset.FLAVOR, volcano.FLAVOR, kubeflow.FLAVOR)}
"""Every flavor, the default (`job`: needs nothing but Kubernetes) first."""

AUTO_ORDER: tuple[str, ...] = tuple(
    name for name, f in sorted(((n, f) for n, f in FLAVORS.items() if f.auto is not None),
                               key=lambda item: item[1].auto or 0))
"""Preference when no flavor is named: gang restart and one object per job where the cluster has it."""


def get_flavor(flavor: str | Flavor) -> Flavor:
    """The flavor called `flavor`; UsageError naming the known ones for any other name."""
    if isinstance(flavor, Flavor):
        return flavor
    found = FLAVORS.get(flavor)
    if found is None:
        if flavor in BACKENDS or flavor in BACKEND_ALIASES:
            raise UsageError(f"{flavor} is a backend, not a flavor: one of {', '.join(FLAVORS)}")
        raise UsageError(f"unknown flavor {flavor!r}: one of {', '.join(FLAVORS)}")
    return found


def flavor_of(obj: Mapping[str, Any]) -> Flavor | None:
    """The flavor a workload object belongs to: its kubetrain annotation, else its kind; None if none. A
    document submitted as written is followed as its kind (`written`)."""
    ann = annotations_of(obj)
    if ann.get(AS_WRITTEN_ANNOTATION) == "true":
        return written_of(obj)
    named = FLAVORS.get(ann.get(FLAVOR_ANNOTATION) or "")
    if named is not None:
        return named
    return next((f for f in FLAVORS.values() if f.owns(obj)), None)


def flavors_that(test: Callable[[Features], bool]) -> tuple[str, ...]:
    """The names of the flavors whose features pass `test`, in registry order (for "flavors that can")."""
    return tuple(name for name, f in FLAVORS.items() if test(f.features))


def lookup_order() -> list[Flavor]:
    """The flavors in the order a job is looked for: the automatic choices first, then the rest."""
    return sorted(FLAVORS.values(), key=lambda f: (f.auto is None, f.auto or 0))


def workload_resources() -> list[Resource]:
    """Every flavor's workload kinds, and those of the kinds followed as written: known to a client without
    discovery."""
    out = [r for f in FLAVORS.values() for r in f.resources]
    return out + [r for f in WRITTEN for r in f.resources if r not in out]


__all__ = [
    "AUTO_ORDER",
    "FLAVORS",
    "WRITTEN",
    "Controller",
    "Features",
    "Flavor",
    "FlavorUnavailable",
    "flavor_of",
    "flavors_that",
    "get_flavor",
    "lookup_order",
    "workload_resources",
    "written_kind",
    "written_of",
]
