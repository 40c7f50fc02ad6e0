"""A TrainJob path said as the source field it came from: an error or warning about the converted job (the
model's validation, a backend's refusal, a render's warning) pointed at the field and line the user wrote, the
TrainJob path kept in parentheses. Read from the walker's notes (where each source field went)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..jobspec.errors import FieldError, Path
from .walker import FieldNote, dotted, parse_path


def to_source(
    error: FieldError, notes: list[FieldNote], file: str | None, kind: str, data: Mapping[str, Any] | None = None
) -> FieldError:
    """`error`, which names a TrainJob path, pointed at the source field it came from and its line (the TrainJob
    path kept in parentheses); as it was, in `file`, when no source field went there."""
    if error.line is not None and error.file is not None:
        return error  # already located (an error raised while converting names its source)
    target = dotted(error.path)
    found = source_for(error.path, notes, data or {})
    if found is None:
        return in_file(error, file)
    source, line, note_file = found
    message = f"{error.message} (as TrainJob {target})"
    return FieldError(source, message, error.value, error.has_value, error.hint, file=note_file or file, line=line)


def source_for(
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


def leading_path(text: str) -> tuple[Path, str] | None:
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


def in_file(error: FieldError, file: str | None) -> FieldError:
    return error if error.file or file is None else error.located(file, error.line)


__all__ = ["in_file", "leading_path", "source_for", "to_source"]
