"""Render problems: collected with their spec field paths, raised together as one SpecError."""

from __future__ import annotations

from collections.abc import Iterable

from ....contract.choices import FLAVORS
from ....jobspec import FieldError, SpecError
from ....jobspec.errors import Path


def flavors_phrase(flavors: Iterable[str]) -> str:
    """`("jobset", "volcano")` → "flavors that can express it: jobset, volcano"; none → says so. The
    names come in the registry's order (the CLI's choices, held equal to it by a test)."""
    able = set(flavors)
    names = [f for f in FLAVORS if f in able]
    if not names:
        return "no Kubernetes flavor can express it"
    if len(names) == 1:
        return f"only the {names[0]} flavor can express it"
    return f"flavors that can express it: {', '.join(names)}"


class Problems:
    """Every problem found while rendering, so the user sees them all at once."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, path: Path, message: str, *, hint: str | None = None) -> None:
        error = FieldError(tuple(path), message, hint=hint)
        if error not in self.errors:  # several roles inherit one job-level field: say it once
            self.errors.append(error)

    def unsupported(
        self, path: Path, what: str, flavor: str, able: Iterable[str], *, hint: str | None = None
    ) -> None:
        """`what` cannot be expressed by `flavor`; name the flavors that can."""
        self.add(path, f"{what}: the {flavor} flavor cannot express it; {flavors_phrase(able)}", hint=hint)

    def raise_if_any(self) -> None:
        if self.errors:
            raise SpecError(list(self.errors))


__all__ = ["Problems", "flavors_phrase"]
