"""The machinery every foreign job kind shares: walk a foreign document field by field, note where each field
went (mapped, approximated, refused), validate the TrainJob it becomes, and point errors back at the SOURCE.

Why a walker: a converter that reads the fields it knows and ignores the rest would drop what it does not know
without a word. The walker remembers what was consumed; every leaf left at the end is reported as refused
("not supported by kubetrain"), so a user sees every field of their file accounted for.

Layer: imports `jobspec`, `frameworks` and `contract`; never a backend or the CLI.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..jobspec.errors import FieldError, Path, SpecError, did_you_mean, format_path
from ..jobspec.load import parse_override_path
from ..jobspec.model import TrainJob
from ..jobspec.yaml_source import NO_LOCATION, Located

Verdict = Literal["mapped", "approximated", "refused"]

NOT_SUPPORTED = "not supported by kubetrain"
"""The reason given for a field no converter took."""

FieldTree = Mapping[str, "FieldTree"] | None
"""The known fields of a kind, for did-you-mean on typos: a mapping of names to their own trees; `None` below a
name means "anything below is accepted as is" (a scalar, or a subtree not checked here). The key `ANY_KEY`
stands for every key of a map with free keys (labels, replica specs by role). A list's items share its tree."""

ANY_KEY = "*"


@dataclass(frozen=True)
class FieldNote:
    """Where one field of the source went."""

    source: str
    """The source field path, dotted with [i] for list items: `spec.worker.template.spec.containers[0].image`."""
    verdict: Verdict
    target: str | None
    """The TrainJob path it went to (`spec.image`), None when refused."""
    reason: str = ""
    """For approximated: how; for refused: why not."""
    line: int | None = None
    """The source line, when the document came from a file."""
    file: str | None = None
    """The file of that line when it is not the document's own (a Run:ai base workload's template)."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        if self.verdict == "refused":
            return f"{where}{self.source}: refused: {self.reason}"
        if self.verdict == "approximated":
            return f"{where}{self.source}: approximated as {self.target}: {self.reason}"
        return f"{where}{self.source} → {self.target}"


def dotted(path: Path) -> str:
    """A path tuple as the notes write it (`spec.worker.template.spec.containers[0].image`)."""
    return format_path(path) if path else "<root>"


def parse_path(path: str | Path) -> Path:
    """`spec.containers[0].image` / `metadata.labels."example.com/x"` → a path tuple (tuples pass through)."""
    if isinstance(path, tuple):
        return path
    return parse_override_path(path) if path else ()


_MISSING = object()


class SourceWalker:
    """Walks a foreign document; every leaf must be taken, approximated or refused — whatever is left at the end
    is reported as refused ("not supported by kubetrain"), so nothing is dropped silently."""

    def __init__(self, doc: Mapping[str, Any] | Located, *, lines: Located | None = None) -> None:
        if isinstance(doc, Located):
            lines = lines or doc
        self.doc: Mapping[str, Any] = doc.data if isinstance(doc, Located) else doc
        self._lines = lines
        self._consumed: set[Path] = set()
        self._notes: list[FieldNote] = []

    # -- reading -----------------------------------------------------------------------------------------

    def get(self, path: str | Path, default: Any = None) -> Any:
        """The value at `path`, without consuming it; `default` when absent."""
        value = self._lookup(parse_path(path))
        return default if value is _MISSING else value

    def has(self, path: str | Path) -> bool:
        return self._lookup(parse_path(path)) is not _MISSING

    def keys(self, path: str | Path) -> list[str]:
        """The keys of the mapping at `path` (none when absent or not a mapping), without consuming."""
        value = self.get(path)
        return list(value) if isinstance(value, Mapping) else []

    def indexes(self, path: str | Path) -> range:
        """The indexes of the list at `path` (none when absent or not a list), without consuming."""
        value = self.get(path)
        return range(len(value)) if isinstance(value, list) else range(0)

    def line(self, path: str | Path) -> int | None:
        """The source line of `path` (or of its nearest ancestor), when the document came from a file."""
        if self._lines is None:
            return None
        where = self._lines.where.get(parse_path(path))
        if where is not None and where != NO_LOCATION:
            return where[1] or None
        return self._lines.line_of(parse_path(path))[1]

    def file(self, path: str | Path = ()) -> str | None:
        """The file `path` was read from (the document's, or a template's merged into it)."""
        if self._lines is None:
            return None
        return self._lines.line_of(parse_path(path))[0] or self._lines.line_of(())[0]

    # -- consuming ---------------------------------------------------------------------------------------

    def take(self, path: str | Path, target: str | None = None, default: Any = None) -> Any:
        """Consume the subtree at `path` and note it "mapped" to `target` (when present); its value, or
        `default` when absent. `target=None` consumes without a target (a field read to decide something)."""
        key = parse_path(path)
        value = self._lookup(key)
        if value is _MISSING:
            return default
        self._consume(key, "mapped", target, "")
        return value

    def approx(self, path: str | Path, target: str | None, reason: str) -> Any:
        """Consume the subtree at `path`, noting it "approximated" as `target` with how; its value (None when
        absent: then nothing is noted)."""
        key = parse_path(path)
        value = self._lookup(key)
        if value is _MISSING:
            return None
        self._consume(key, "approximated", target, reason)
        return value

    def refuse(self, path: str | Path, reason: str) -> None:
        """Consume the subtree at `path`, noting it "refused" with why (nothing when absent)."""
        key = parse_path(path)
        if self._lookup(key) is _MISSING:
            return
        self._consume(key, "refused", None, reason)

    def consumed(self, path: str | Path) -> bool:
        """Whether `path` (or an ancestor) has been consumed."""
        key = parse_path(path)
        return any(key[:end] in self._consumed for end in range(len(key) + 1))

    def leftovers(self, path: str | Path = ()) -> list[Path]:
        """The largest subtrees below `path` that nothing consumed yet."""
        key = parse_path(path)
        return list(self._leftovers(self._lookup(key), key)) if self.has(key) else []

    def notes(self) -> list[FieldNote]:
        """Every note, in document order, including the leftovers as refused."""
        leftovers = [
            FieldNote(dotted(path), "refused", None, NOT_SUPPORTED, self.line(path), self._other_file(path))
            for path in self._leftovers(self.doc, ())
        ]
        order = {path: i for i, path in enumerate(_all_paths(self.doc, ()))}
        notes = [*self._notes, *leftovers]
        return sorted(notes, key=lambda note: order.get(parse_path(note.source), len(order)))

    # -- internals ---------------------------------------------------------------------------------------

    def _consume(self, key: Path, verdict: Verdict, target: str | None, reason: str) -> None:
        if self.consumed(key):
            return  # a field noted once: the first decision about it stands
        self._consumed.add(key)
        self._notes.append(FieldNote(dotted(key), verdict, target, reason, self.line(key), self._other_file(key)))

    def _other_file(self, key: Path) -> str | None:
        file = self.file(key)
        return file if file is not None and file != self.file() else None

    def _lookup(self, path: Path) -> Any:
        node: Any = self.doc
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or not -len(node) <= part < len(node):
                    return _MISSING
                node = node[part]
            else:
                if not isinstance(node, Mapping) or part not in node:
                    return _MISSING
                node = node[part]
        return node

    def _leftovers(self, node: Any, path: Path) -> Iterator[Path]:
        """The largest subtrees nothing consumed, below `path`."""
        if path in self._consumed:
            return
        if path and not self._touched_below(path):
            if node not in ({}, [], None):  # an empty block says nothing: not worth a note
                yield path
            return
        if isinstance(node, Mapping):
            for key, value in node.items():
                yield from self._leftovers(value, (*path, str(key)))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from self._leftovers(value, (*path, i))

    def _touched_below(self, path: Path) -> bool:
        n = len(path)
        return any(len(done) > n and done[:n] == path for done in self._consumed)


def _all_paths(node: Any, path: Path) -> Iterator[Path]:
    yield path
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _all_paths(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _all_paths(value, (*path, i))


# -- parts every kind shares ----------------------------------------------------------------------------

METADATA_FIELDS: FieldTree = None
"""Object metadata is not checked field by field: the API server's fields (uid, resourceVersion, ...) are
refused by `take_metadata` with the reason, not called typos."""

SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
"""The metadata fields the API server writes on an object it stored: never part of a job's definition."""

_SERVER_SET = (*SERVER_METADATA, "ownerReferences", "finalizers")


def take_metadata(walker: SourceWalker) -> dict[str, Any]:
    """`metadata` → TrainJob metadata: name, generateName (namePrefix), namespace, labels, annotations; what the
    API server writes (uid, resourceVersion, managedFields, ...) is refused with that reason."""
    out: dict[str, Any] = {}
    for src, dst in (
        ("name", "name"),
        ("generateName", "namePrefix"),
        ("namespace", "namespace"),
        ("labels", "labels"),
        ("annotations", "annotations"),
    ):
        if walker.has(("metadata", src)):
            out[dst] = copy.deepcopy(walker.take(("metadata", src), f"metadata.{dst}"))
    for name in _SERVER_SET:
        walker.refuse(("metadata", name), "written by the API server, not part of a job's definition")
    return out


def refuse_status(walker: SourceWalker) -> None:
    walker.refuse("status", "written by the controller; a new job starts without one")


def take_header(walker: SourceWalker) -> None:
    """apiVersion and kind: read (they chose the converter), replaced by kubetrain's own."""
    walker.take("apiVersion", "apiVersion")
    walker.take("kind", "kind")


# -- typos --------------------------------------------------------------------------------------------


def unknown_fields(doc: Any, tree: FieldTree, *, lines: Located | None = None, kind: str = "") -> list[FieldError]:
    """Every key of `doc` that `tree` does not know, each with a did-you-mean from the kind's own fields and its
    source line: a typo in a DeepSpeedJob is answered with DeepSpeedJob's names, not TrainJob's."""
    errors: list[FieldError] = []
    _check(doc, tree, (), errors, kind)
    if lines is None:
        return errors
    return [e.located(*lines.line_of(e.path)) for e in errors]


def _check(node: Any, tree: FieldTree, path: Path, errors: list[FieldError], kind: str) -> None:
    if tree is None:
        return
    if isinstance(node, list):
        for i, item in enumerate(node):
            _check(item, tree, (*path, i), errors, kind)
        return
    if not isinstance(node, Mapping):
        return
    free = tree.get(ANY_KEY, _MISSING)
    for key, value in node.items():
        key = str(key)
        if key in tree:
            _check(value, tree[key], (*path, key), errors, kind)
        elif free is not _MISSING:
            _check(value, free, (*path, key), errors, kind)  # type: ignore[arg-type]
        else:
            known = [name for name in tree if name != ANY_KEY]
            guess = did_you_mean(key, known)
            where = f"a {kind}" if kind else "this object"
            hint = f"did you mean {guess!r}?" if guess else f"{where} takes: {', '.join(sorted(known))}"
            errors.append(FieldError((*path, key), f"is not a field of {where}", hint=hint))


# -- a conversion -------------------------------------------------------------------------------------


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
                out.append(f"{at}{self.kind} {note.source}: approximated as {note.target}: {note.reason}")
            elif note.verdict == "refused":
                out.append(f"{at}{self.kind} {note.source}: ignored: {note.reason}")
        return out

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
        raise SpecError([_in_file(e, file) for e in typos])

    walker = SourceWalker(copy.deepcopy(dict(data)), lines=located)
    result = kind.convert(walker.doc, walker)
    notes = walker.notes()
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
        raise SpecError([_to_source(e, notes, file, kind) for e in exc.errors]) from None


def _to_source(error: FieldError, notes: list[FieldNote], file: str | None, kind: str) -> FieldError:
    target = dotted(error.path)
    note = _note_for(target, notes)
    if note is None:
        return _in_file(error, file)
    hint = error.hint
    message = f"{error.message} (as TrainJob {target})"
    return FieldError(parse_path(note.source), message, error.value, error.has_value, hint, file=file, line=note.line)


def _note_for(target: str, notes: list[FieldNote]) -> FieldNote | None:
    """The note whose target is `target` or its nearest ancestor."""
    best: FieldNote | None = None
    for note in notes:
        if note.target is None:
            continue
        covers = target == note.target or target.startswith((note.target + ".", note.target + "["))
        if covers and (best is None or len(note.target) > len(best.target or "")):
            best = note
    return best


def _in_file(error: FieldError, file: str | None) -> FieldError:
    return error if error.file or file is None else error.located(file, error.line)


__all__ = [
    "ANY_KEY",
    "NOT_SUPPORTED",
    "SERVER_METADATA",
    "Conversion",
    "FieldNote",
    "FieldTree",
    "ForeignKind",
    "ForeignRefused",
    "SimpleKind",
    "SourceWalker",
    "Verdict",
    "dotted",
    "parse_path",
    "refuse_status",
    "run_conversion",
    "take_header",
    "take_metadata",
    "unknown_fields",
    "validate_converted",
]
