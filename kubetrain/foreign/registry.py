"""The foreign kinds kubetrain converts, each from its own module, imported on first use.

Convention for a converter module `kubetrain/foreign/<module>.py`: it defines `KINDS: tuple[ForeignKind, ...]`
(one entry per kind it converts; `base.SimpleKind` builds one), and its kinds' names are listed in
`kubetrain.jobspec.foreign_names.FOREIGN_NAMES` with that module's name — the one table the job model also reads
to tell a foreign file fed as a TrainJob apart.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

from ..jobspec.errors import FieldError, SpecError
from ..jobspec.foreign_names import FOREIGN_NAMES, ForeignName, foreign_name_of
from ..jobspec.yaml_source import Located
from .conversion import Conversion, ForeignKind, run_conversion

FOREIGN_KINDS: dict[tuple[str, str], str] = {(n.group, n.kind): n.module for n in FOREIGN_NAMES}
"""(apiVersion group, kind) → the module of `kubetrain.foreign` that converts it."""


@functools.cache
def _module_kinds(module: str) -> tuple[ForeignKind, ...]:
    try:
        mod = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.{module}":
            return ()  # a converter not written yet: the kind is known, not convertible
        raise
    kinds: tuple[ForeignKind, ...] = tuple(getattr(mod, "KINDS", ()))
    return kinds


def foreign_kind(kind: str, api_version: str) -> ForeignKind | None:
    """The converter of `kind` at `api_version`, or None."""
    group = api_version.rpartition("/")[0]
    module = FOREIGN_KINDS.get((group, kind))
    if module is None:
        return None
    return next((k for k in _module_kinds(module) if k.kind == kind and api_version in k.api_versions), None)


def all_kinds() -> list[ForeignKind]:
    """Every converter there is, in the table's order."""
    seen: list[ForeignKind] = []
    for module in dict.fromkeys(FOREIGN_KINDS.values()):
        seen += [k for k in _module_kinds(module) if k not in seen]
    return seen


def kind_of(doc: Mapping[str, Any]) -> ForeignKind | None:
    """The converter for `doc`, by its apiVersion (group/version) and kind; None when it is none of them."""
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return None
    return foreign_kind(kind, api)


def is_foreign(doc: Mapping[str, Any]) -> bool:
    """`doc` declares a foreign kind kubetrain knows (whatever its version)."""
    return foreign_name_of(doc) is not None


def convert(
    doc: Mapping[str, Any] | Located,
    *,
    file: str | None = None,
    strict: bool = False,
    base_dir: str | None = None,
) -> Conversion:
    """A foreign document as a TrainJob with its notes. Errors name the SOURCE field path and line;
    `strict=True` raises on any refused field (each with its path and reason)."""
    data = doc.data if isinstance(doc, Located) else doc
    if not isinstance(data, Mapping):
        raise SpecError([FieldError((), "a job must be a mapping (apiVersion, kind, metadata, spec)", file=file)])
    converter = kind_of(data)
    if converter is None:
        raise SpecError([_unknown(data, file, doc if isinstance(doc, Located) else None)])
    return run_conversion(converter, doc, file=file, strict=strict, base_dir=base_dir)


def _unknown(data: Mapping[str, Any], file: str | None, located: Located | None) -> FieldError:
    line = located.line_of(("apiVersion",))[1] if located is not None else None
    name: ForeignName | None = foreign_name_of(data)
    if data.get("apiVersion") == "kubetrain.dev/v1alpha1" and data.get("kind") == "TrainJob":
        return FieldError(
            ("kind",),
            "is a TrainJob already: it needs no conversion",
            hint="load it as it is: kubetrain.load(path), or kubetrain.jobspec.from_dict(doc)",
            file=file,
            line=line,
        )
    if name is None:
        known = ", ".join(f"{n.kind} ({'|'.join(n.api_versions)})" for n in FOREIGN_NAMES)
        return FieldError(
            ("kind",),
            "is not a kind kubetrain converts",
            data.get("kind"),
            True,
            hint=f"kubetrain reads TrainJob and: {known}",
            file=file,
            line=line,
        )
    if data.get("apiVersion") not in name.api_versions:
        return FieldError(
            ("apiVersion",),
            f"kubetrain reads {name.kind} at {' or '.join(name.api_versions)}",
            data.get("apiVersion"),
            True,
            file=file,
            line=line,
        )
    return FieldError(
        ("kind",), f"converting a {name.kind} is not available in this version of kubetrain", file=file, line=line
    )


__all__ = ["FOREIGN_KINDS", "all_kinds", "convert", "foreign_kind", "is_foreign", "kind_of"]
