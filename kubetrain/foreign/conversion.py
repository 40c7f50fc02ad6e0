"""A conversion: a foreign kind's converter run over its document (typos first, then every field through a
`SourceWalker`), the TrainJob it becomes validated by the normal model, each error and warning said of the source
field it came from; `Conversion` is what a caller gets back (the job, the notes, the data)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..jobspec.errors import FieldError, SpecError
from ..jobspec.model import TrainJob
from ..jobspec.yaml_source import Located
from . import source_paths
from .typos import unknown_fields
from .walker import FieldNote, FieldTree, SourceWalker, parse_path


@dataclass
class Conversion:
    """A foreign document as a TrainJob, with where each of its fields went."""

    kind: str
    """The source kind: "DeepSpeedJob"."""
    api_version: str
    job: TrainJob
    notes: list[FieldNote]
    data: dict[str, Any] = field(default_factory=dict)
    """The TrainJob data the converter produced (what `kubetrain convert` prints)."""
    file: str | None = None

    def refused(self) -> list[FieldNote]:
        return [note for note in self.notes if note.verdict == "refused"]

    def approximated(self) -> list[FieldNote]:
        return [note for note in self.notes if note.verdict == "approximated"]

    def mapped(self) -> list[FieldNote]:
        return [note for note in self.notes if note.verdict == "mapped"]

    def warnings(self) -> list[str]:
        """One line per approximated or refused field, naming its source path (and line)."""
        where = f"{self.file}:" if self.file else ""
        out = []
        for note in self.notes:
            file = f"{note.file}:" if note.file else where
            at = f"{file}{note.line}: " if note.line and file else f"line {note.line}: " if note.line else ""
            if note.verdict == "approximated":
                out.append(f"{at}{self.kind} {note.source}: approximated{note.as_target}: {note.reason}")
            elif note.verdict == "refused":
                out.append(f"{at}{self.kind} {note.source}: ignored: {note.reason}")
        return out

    def to_source(self, errors: Sequence[FieldError]) -> list[FieldError]:
        """Errors about the converted job (a backend's refusal, a local check), which name TrainJob paths, pointed
        at the source fields they came from, with their lines; the TrainJob path stays in parentheses."""
        return [source_paths.to_source(e, self.notes, self.file, self.kind, self.data) for e in errors]

    def at_source(self, warning: str) -> str:
        """A warning about the converted job that starts with one of its field paths (`spec.roles.worker.security.
        hostNetwork: RELAXES ...`, as a render's and a backend's do), said of the source field that went there,
        with its file and line, the TrainJob path kept in parentheses (as `to_source` says an error); as it was
        when it names no field, or one no source field went to."""
        found = source_paths.leading_path(warning)
        if found is None:
            return warning
        path, message = found
        source = source_paths.source_for(path, self.notes, self.data)
        if source is None:
            return warning
        return str(source_paths.to_source(FieldError(path, message), self.notes, self.file, self.kind, self.data))

    def sources_of(self) -> dict[str, list[str]]:
        """TrainJob path → the source paths that went there (for comments naming the source of each value)."""
        out: dict[str, list[str]] = {}
        for note in self.notes:
            if note.target:
                out.setdefault(note.target, []).append(note.source)
        return out


class ForeignKind(Protocol):
    """One foreign job kind: its names, its known fields (for did-you-mean), and its converter."""

    kind: str
    api_versions: tuple[str, ...]

    def fields(self) -> FieldTree:
        """The kind's field tree (see `FieldTree`)."""
        ...

    def convert(self, doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
        """TrainJob data (a dict) from `doc`, every field consumed through `walker`."""
        ...


@dataclass(frozen=True)
class SimpleKind:
    """A `ForeignKind` from its parts: what most converter modules define."""

    kind: str
    api_versions: tuple[str, ...]
    field_tree: Callable[[], FieldTree]
    converter: Callable[[Mapping[str, Any], SourceWalker], dict[str, Any]]

    def fields(self) -> FieldTree:
        return self.field_tree()

    def convert(self, doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
        return self.converter(doc, walker)


class ForeignRefused(SpecError):
    """`--strict`: the source has fields kubetrain does not map."""


def run_conversion(
    kind: ForeignKind,
    doc: Mapping[str, Any] | Located,
    *,
    file: str | None = None,
    strict: bool = False,
    base_dir: str | None = None,
) -> Conversion:
    """Convert `doc` with `kind`: typos first (did-you-mean from the kind's fields), then the converter, then
    the TrainJob model's validation with each error pointed at the source field it came from."""
    located = doc if isinstance(doc, Located) else None
    data: Mapping[str, Any] = located.data if located is not None else doc  # type: ignore[assignment]
    file = file or (located.line_of(())[0] if located is not None else None)

    typos = unknown_fields(data, kind.fields(), lines=located, kind=kind.kind)
    if typos:
        raise SpecError([source_paths.in_file(e, file) for e in typos])

    walker = SourceWalker(copy.deepcopy(dict(data)), lines=located)
    result = kind.convert(walker.doc, walker)
    notes = walker.notes()
    if walker.errors:
        raise SpecError([source_paths.in_file(e, file) for e in walker.errors])
    api_version = str(data.get("apiVersion", ""))
    if strict:
        refused = [n for n in notes if n.verdict == "refused"]
        if refused:
            raise ForeignRefused(
                [
                    FieldError(
                        parse_path(n.source),
                        f"{kind.kind} field not mapped: {n.reason}",
                        file=file,
                        line=n.line,
                        hint="drop it, or convert without --strict to see it as a warning",
                    )
                    for n in refused
                ]
            )
    job = validate_converted(result, notes, file=file, kind=kind.kind, base_dir=base_dir)
    return Conversion(kind.kind, api_version, job, notes, data=result, file=file)


def validate_converted(
    data: dict[str, Any],
    notes: list[FieldNote],
    *,
    file: str | None = None,
    kind: str = "",
    base_dir: str | None = None,
) -> TrainJob:
    """Validate converted TrainJob data with the normal model; errors name the SOURCE field and line."""
    from ..jobspec.load import from_dict

    try:
        return from_dict(data, base_dir=base_dir or ".")
    except SpecError as exc:
        raise SpecError([source_paths.to_source(e, notes, file, kind, data) for e in exc.errors]) from None



__all__ = ["Conversion", "ForeignKind", "ForeignRefused", "SimpleKind", "run_conversion", "validate_converted"]
