"""Validation errors a person can act on: field path, bad value, what is allowed, file and line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..contract.errors import EXIT_USAGE, KubetrainError

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """`("spec", "roles", "worker", "replicas")` → `spec.roles.worker.replicas`; list items as `[i]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}" if _plain_key(part) else f'."{part}"'
        else:
            out = part if _plain_key(part) else f'"{part}"'
    return out or "<root>"


def _plain_key(key: str) -> bool:
    return bool(key) and all(c.isalnum() or c in "_-" for c in key)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest known name to a misspelt one, compared case-insensitively."""
    lowered = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


@dataclass(frozen=True)
class FieldError:
    """One problem with one field of a job spec."""

    path: Path
    message: str
    value: object = None
    has_value: bool = False
    hint: str | None = None
    file: str | None = None
    line: int | None = None

    def located(self, file: str | None, line: int | None) -> FieldError:
        return replace(self, file=file, line=line)

    def __str__(self) -> str:
        where = ""
        if self.file and self.line:
            where = f"{self.file}:{self.line}: "
        elif self.file:
            where = f"{self.file}: "
        text = f"{where}{format_path(self.path)}: {self.message}"
        if self.has_value:
            text += f" (got {_show(self.value)})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class SpecError(KubetrainError, ValueError):
    """A job spec that cannot be used, with every problem found (not just the first)."""

    exit_code = EXIT_USAGE

    errors: list[FieldError] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    @classmethod
    def single(
        cls,
        path: Sequence[str | int],
        message: str,
        *,
        value: object = None,
        has_value: bool = False,
        hint: str | None = None,
    ) -> SpecError:
        return cls([FieldError(tuple(path), message, value=value, has_value=has_value, hint=hint)])

    @property
    def paths(self) -> list[str]:
        return [format_path(e.path) for e in self.errors]

    def __str__(self) -> str:
        if len(self.errors) == 1:
            return str(self.errors[0])
        lines = [f"{len(self.errors)} problems:"]
        lines += ["  " + str(e).replace("\n", "\n  ") for e in self.errors]
        return "\n".join(lines)
