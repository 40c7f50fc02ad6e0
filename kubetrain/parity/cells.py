"""The parity table's vocabulary: a `Cell` (one field on one backend: its verdict and why), a `Row` (one field,
or one value of it, on every backend, with the sample job the tests hold it to) and the samples' documents.

Standard library and the contract only, like the table: the local backend reads the table when it warns of
the fields it does not use, and nothing here may pull in another backend.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from ..contract.choices import FLAVORS

KUBERNETES: tuple[str, ...] = FLAVORS
"""The Kubernetes flavors, in the registry's order."""
BACKENDS = ("local", *KUBERNETES)
"""Every backend a job can run on, as the table's columns: the local one, then each Kubernetes flavor."""

HONOURED = "honoured"
REFUSED = "refused"
APPROXIMATED = "approximated"
IGNORED = "ignored"
VERDICTS = (HONOURED, REFUSED, APPROXIMATED, IGNORED)


@dataclass(frozen=True)
class Cell:
    """One field on one backend."""

    verdict: str
    note: str = ""
    """refused: why, or what to use instead; approximated: how; ignored: why; honoured: how (optional)."""
    same: bool = False
    """Honoured without a trace: the field asks for what the backend does without it."""
    unchecked: str = ""
    """Why the consistency tests cannot check this cell (keep these few)."""
    warns: str = ""
    """Honoured, with a warning for a human's eye (a privileged pod): what it says."""
    mentions: str = ""
    """A warned cell whose warning does not name the field's path: text the warning holds instead."""

    def text(self) -> str:
        """The cell in docs/parity.md."""
        if self.verdict == HONOURED:
            if self.same:
                return f"✓ ({self.note})" if self.note else "✓ (the default)"
            notes = [n for n in (self.note, f"warns: {self.warns}" if self.warns else "") if n]
            return f"✓ ({'; '.join(notes)})" if notes else "✓"
        label = "not used (warned)" if self.verdict == IGNORED else self.verdict
        return f"{label}: {self.note}" if self.note else label


def ok(note: str = "", *, warns: str = "", unchecked: str = "") -> Cell:
    return Cell(HONOURED, note, unchecked=unchecked, warns=warns)


def same(note: str = "") -> Cell:
    """Honoured: it asks for what the backend does anyway, so nothing changes."""
    return Cell(HONOURED, note, same=True)


def refused(note: str = "") -> Cell:
    return Cell(REFUSED, note)


def approx(how: str, *, mentions: str = "") -> Cell:
    return Cell(APPROXIMATED, how, mentions=mentions)


def ignored(why: str) -> Cell:
    return Cell(IGNORED, why)


DELETE = object()
"""A sample's value that removes the key."""


@dataclass(frozen=True)
class Row:
    """One field (or one value of a field that changes the verdict) on every backend."""

    field: str
    """The schema path: `spec.runPolicy.backoffLimit`, `spec.ports[].name`, `spec.mounts[type=s3].bucket`.
    A role's setting (`spec.roles.<role>.image`) means what the job's does, at the role's path: the job's row."""
    cells: Mapping[str, Cell]
    sample: Mapping[str, Any]
    """Assignments over `BASE` (dotted paths → values) that set the field."""
    when: str = ""
    """The value (or case) this row is about, when the verdict depends on it: `All`, `valueFrom.secretKeyRef`."""
    baseline: Mapping[str, Any] | None = None
    """Assignments over `BASE` to compare with (None: `BASE` itself): what the sample changes must be the field."""
    at: str = ""
    """Where a refusal is reported, when not at the field's path (`spec.roles.launcher`)."""
    files: Mapping[str, str] = dataclass_field(default_factory=dict)
    """Files beside the sample job (a `spec.base` template)."""
    role: Mapping[str, Cell] = dataclass_field(default_factory=dict)
    """Backends where a role's setting of the field does not mean what the job's does: its cell there."""
    section: str = ""

    @property
    def key(self) -> str:
        return f"{self.field}={self.when}" if self.when else self.field

    @property
    def path(self) -> str:
        """The field's path in the sample job: list items as [0]."""
        if self.at:
            return self.at
        return re.sub(r"\[(type=[^\]]*)?\]", "[0]", self.field)

    def cell(self, backend: str) -> Cell:
        return self.cells[backend]

    def cell_at(self, backend: str, path: str) -> Cell:
        """The cell of the field set at `path`: a role's (`spec.roles.<role>....`) or the job's."""
        return self.role.get(backend, self.cells[backend]) if path.startswith("spec.roles.") else self.cells[backend]

    def matches(self, value: Any) -> bool:
        """Whether a job's value of the field is the case this row is about (`when`, else any)."""
        if not self.when:
            return True
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return text == self.when


BASE: dict[str, Any] = {
    "apiVersion": "kubetrain.dev/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "parity"},
    "spec": {"framework": "pytorch", "image": "registry.example.com/train:1", "replicas": 2,
             "run": {"python": ["train.py", "--steps", "5"]}},
}
"""The job every sample starts from: two PyTorch workers, which every backend runs."""

def assign(base: Mapping[str, Any], assignments: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `base` with each dotted path set to its value (`DELETE` removes the key)."""
    out = copy.deepcopy(dict(base))
    for path, value in assignments.items():
        *parents, last = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return out


def sample_document(row_: Row) -> dict[str, Any]:
    return assign(BASE, row_.sample)


def baseline_document(row_: Row) -> dict[str, Any]:
    return assign(BASE, row_.baseline or {})


__all__ = [
    "APPROXIMATED",
    "BACKENDS",
    "BASE",
    "DELETE",
    "HONOURED",
    "IGNORED",
    "KUBERNETES",
    "REFUSED",
    "VERDICTS",
    "Cell",
    "Row",
    "approx",
    "assign",
    "baseline_document",
    "ignored",
    "ok",
    "refused",
    "same",
    "sample_document",
]
