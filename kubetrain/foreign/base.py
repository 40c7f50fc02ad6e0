"""The machinery every foreign job kind shares: walk a foreign document field by field, note where each field
went (mapped, approximated, refused), validate the TrainJob it becomes, and point errors back at the SOURCE.

Why a walker: a converter that reads the fields it knows and ignores the rest would drop what it does not know
without a word. The walker remembers what was consumed; every leaf left at the end is reported as refused
("not supported by kubetrain"), so a user sees every field of their file accounted for.

Layer: imports `jobspec`, `frameworks` and `contract`; never a backend or the CLI.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
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
            return f"{where}{self.source}: approximated{self.as_target}: {self.reason}"
        return f"{where}{self.source} → {self.target}"

    @property
    def as_target(self) -> str:
        """` as <target>` for an approximated note, empty when the field went nowhere of its own (kubetrain
        does it its way): the reason then says how."""
        return f" as {self.target}" if self.target else ""


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
        self.errors: list[FieldError] = []
        """Values the converter found invalid (`invalid`), raised together after it."""

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

    def note(self, path: str | Path, target: str, reason: str = "") -> None:
        """Note that `path` (present) went to `target` without consuming it: what its absence below it means (a
        container with no command runs its image's entrypoint), said at its line; its own fields are still to
        be taken one by one."""
        key = parse_path(path)
        self._notes.append(FieldNote(dotted(key), "mapped", target, reason, self.line(key), self._other_file(key)))

    def refuse(self, path: str | Path, reason: str) -> None:
        """Consume the subtree at `path`, noting it "refused" with why (nothing when absent)."""
        key = parse_path(path)
        if self._lookup(key) is _MISSING:
            return
        self._consume(key, "refused", None, reason)

    def invalid(
        self, path: str | Path, message: str, *, choices: tuple[str, ...] = (), hint: str | None = None
    ) -> None:
        """Record an error for the value at `path`, one kubetrain cannot honour as written (a wrong type, a value
        not among `choices`), with its line and a did-you-mean among `choices`; the conversion raises them all
        (`errors`) once the converter is done. A value the source system itself would reject is an error, never a
        note: the job would not mean what its file says."""
        key = parse_path(path)
        value = self.get(key)
        if hint is None and choices:
            guess = did_you_mean(str(value), choices)
            one_of = f"one of: {', '.join(choices)}"
            hint = f"did you mean '{guess}'? ({one_of})" if guess else one_of
        self.errors.append(
            FieldError(key, message, value, True, hint, file=self.file(key) or None, line=self.line(key))
        )
        self._consumed.add(key)  # said as an error: not a leftover too

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
        if not _is_pod_template(node, path):
            return
        tree = _pod_template_tree()
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


def _is_pod_template(node: Any, path: Path) -> bool:
    """An unchecked `template` shaped as a PodTemplateSpec (metadata and a spec with containers): the pod template
    of a Kubeflow replica spec, a Volcano task, a JobSet's Job. Its typos are checked here, against the API's own
    fields, because once converted the pod template only meets the TrainJob model, whose error would name the
    TrainJob's path, not the line the user wrote."""
    if not path or path[-1] != "template" or not isinstance(node, Mapping) or not set(node) <= {"metadata", "spec"}:
        return False
    spec = node.get("spec")
    return isinstance(spec, Mapping) and "containers" in spec


def _pod_template_tree() -> FieldTree:
    from .pod_template import pod_template_fields  # imports this module: imported on use

    return pod_template_fields()


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
                out.append(f"{at}{self.kind} {note.source}: approximated{note.as_target}: {note.reason}")
            elif note.verdict == "refused":
                out.append(f"{at}{self.kind} {note.source}: ignored: {note.reason}")
        return out

    def to_source(self, errors: Sequence[FieldError]) -> list[FieldError]:
        """Errors about the converted job (a backend's refusal, a local check), which name TrainJob paths, pointed
        at the source fields they came from, with their lines; the TrainJob path stays in parentheses."""
        return [_to_source(e, self.notes, self.file, self.kind, self.data) for e in errors]

    def at_source(self, warning: str) -> str:
        """A warning about the converted job that starts with one of its field paths (`spec.roles.worker.security.
        hostNetwork: RELAXES ...`, as a render's and a backend's do), said of the source field that went there,
        with its file and line, the TrainJob path kept in parentheses (as `to_source` says an error); as it was
        when it names no field, or one no source field went to."""
        found = _leading_path(warning)
        if found is None:
            return warning
        path, message = found
        source = _source_for(path, self.notes, self.data)
        if source is None:
            return warning
        return str(_to_source(FieldError(path, message), self.notes, self.file, self.kind, self.data))

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
    if walker.errors:
        raise SpecError([_in_file(e, file) for e in walker.errors])
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
        raise SpecError([_to_source(e, notes, file, kind, data) for e in exc.errors]) from None


def _to_source(
    error: FieldError, notes: list[FieldNote], file: str | None, kind: str, data: Mapping[str, Any] | None = None
) -> FieldError:
    """`error`, which names a TrainJob path, pointed at the source field it came from and its line (the TrainJob
    path kept in parentheses); as it was, in `file`, when no source field went there."""
    if error.line is not None and error.file is not None:
        return error  # already located (an error raised while converting names its source)
    target = dotted(error.path)
    found = _source_for(error.path, notes, data or {})
    if found is None:
        return _in_file(error, file)
    source, line, note_file = found
    message = f"{error.message} (as TrainJob {target})"
    return FieldError(source, message, error.value, error.has_value, error.hint, file=note_file or file, line=line)


def _source_for(
    path: Path, notes: list[FieldNote], data: Mapping[str, Any]
) -> tuple[Path, int | None, str | None] | None:
    """The source path, line and file of the TrainJob field at `path`: the note whose target is `path` or its
    nearest ancestor; when the fields that went BELOW `path` say more (a rule over several fields: `spec.run`
    with two run forms), the part of the source they share, at the first one's line."""
    targets = _concrete_targets(notes, path, data)
    covering = [(t, n) for t, n in targets if t == path[: len(t)]]
    below = [n for t, n in targets if len(t) > len(path) and t[: len(path)] == path]
    best = max(covering, key=lambda tn: len(tn[0]), default=None)
    if best is not None and (len(best[0]) == len(path) or not below):
        note = best[1]
        return parse_path(note.source), note.line, note.file
    if not below:
        return None
    sources = [parse_path(n.source) for n in below]
    shared = sources[0]
    for other in sources[1:]:
        shared = _shared_prefix(shared, other)
    if not shared:
        return None
    first = min(below, key=lambda n: n.line or 0)
    return shared, first.line, first.file


_PATH_THEN_TEXT = re.compile(r'(spec(?:\.(?:[A-Za-z0-9_-]+|"[^"]*")|\[\d+\])+): (.+)', re.DOTALL)


def _leading_path(text: str) -> tuple[Path, str] | None:
    """(the TrainJob path a warning starts with, the rest), or None: `spec.mounts[0].src: RELAXES ...`."""
    match = _PATH_THEN_TEXT.fullmatch(text)
    if match is None:
        return None
    try:
        return parse_path(match.group(1)), match.group(2)
    except ValueError:
        return None


def _shared_prefix(a: Path, b: Path) -> Path:
    end = 0
    while end < min(len(a), len(b)) and a[end] == b[end]:
        end += 1
    return a[:end]


def _concrete_targets(notes: list[FieldNote], path: Path, data: Mapping[str, Any]) -> list[tuple[Path, FieldNote]]:
    """Each note's target as a path. A target `spec.mounts[].bucket` (an item the converter appended) is taken
    at the index `path` names, for the notes of one source item only when the converted item holds every key
    they went to: which source the third mount came from is read from the mount itself."""
    out: list[tuple[Path, FieldNote]] = []
    groups: dict[tuple[str, Path], list[tuple[str, FieldNote]]] = {}
    for note in notes:
        if not note.target:
            continue
        if "[]" not in note.target:
            out.append((parse_path(note.target), note))
            continue
        prefix, _, rest = note.target.partition("[]")
        groups.setdefault((prefix, parse_path(note.source)[:-1]), []).append((rest, note))
    for (prefix, _), members in groups.items():
        at = parse_path(prefix)
        index = path[len(at)] if len(path) > len(at) and path[: len(at)] == at else None
        if not isinstance(index, int):
            continue
        items = _lookup_path(data, at)
        item = items[index] if isinstance(items, list) and -len(items) <= index < len(items) else None
        keys = [parse_path(rest.lstrip("."))[:1] for rest, _ in members]
        if not isinstance(item, Mapping) or not all(k and k[0] in item for k in keys):
            continue
        out += [((*at, index, *parse_path(rest.lstrip("."))), note) for rest, note in members]
    return out


def _lookup_path(node: Any, path: Path) -> Any:
    for part in path:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and -len(node) <= part < len(node) else None
        else:
            node = node.get(part) if isinstance(node, Mapping) else None
    return node


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
