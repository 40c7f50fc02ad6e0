"""Walk a foreign document field by field and note where each field went (mapped, approximated, refused).

Why a walker: a converter that reads the fields it knows and ignores the rest would drop what it does not know
without a word. The walker remembers what was consumed; every leaf left at the end is reported as refused
("not supported by kubetrain"), so a user sees every field of their file accounted for.

Layer: imports `jobspec`; never a backend or the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..jobspec.errors import FieldError, Path, did_you_mean, format_path
from ..jobspec.load import parse_override_path
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



__all__ = ["ANY_KEY", "NOT_SUPPORTED", "FieldNote", "FieldTree", "SourceWalker", "Verdict", "dotted", "parse_path"]
