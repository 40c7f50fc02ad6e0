"""`Diagnosis`: one cause holding replicas Pending, with a hint.

The record :mod:`.diagnose` makes from pods, events and Kueue, and a flavor makes from its own objects
(``Flavor.pending_causes``: Volcano's PodGroup). Its own module so that the flavors need not import the
diagnosing, which reads the flavors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Diagnosis:
    """One cause holding one or more replicas."""

    cause: str  #: Unschedulable, ImagePull, ContainerConfig, Mount, Quota, Kueue, PodGroup, ...
    message: str
    hint: str
    replicas: list[str] = field(default_factory=list)

    def line(self) -> str:
        who = ", ".join(self.replicas[:4]) + (f" +{len(self.replicas) - 4}" if len(self.replicas) > 4 else "")
        head = f"{self.cause}" + (f" ({who})" if who else "")
        return f"{head}: {self.message} — hint: {self.hint}"

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "message": self.message, "hint": self.hint, "replicas": list(self.replicas)}


def merge(diags: Iterable[Diagnosis]) -> list[Diagnosis]:
    """Replicas sharing a cause and message become one line."""
    out: dict[tuple[str, str], Diagnosis] = {}
    for d in diags:
        key = (d.cause, d.message)
        if key in out:
            out[key].replicas += [r for r in d.replicas if r not in out[key].replicas]
        else:
            out[key] = Diagnosis(d.cause, d.message, d.hint, list(d.replicas))
    return list(out.values())


__all__ = ["Diagnosis", "merge"]
