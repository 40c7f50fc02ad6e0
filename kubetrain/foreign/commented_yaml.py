"""A Conversion as TrainJob YAML whose comments name the source field of each value:

    image: pytorch:2  # from spec.worker.template.spec.containers[0].image

and, at the end, the source fields that were approximated or not converted, with the reason. The YAML is the
converted job's own document (`TrainJob.to_dict()`), so it loads back as the same TrainJob.
"""

from __future__ import annotations

from typing import Any

import yaml

from .conversion import Conversion
from .walker import FieldNote, dotted

_MAX_SOURCES = 3
_COMMENT_WIDTH = 160


def commented_yaml(conversion: Conversion) -> str:
    sources = _sources(conversion.notes)
    lines = [f"# converted by kubetrain from {conversion.kind} ({conversion.api_version})"]
    if conversion.file:
        lines[0] += f" {conversion.file}"
    lines += _mapping(conversion.job.to_dict(), (), 0, sources)
    approximated, refused = conversion.approximated(), conversion.refused()
    if approximated:
        lines.append("# approximated:")
        lines += [f"#   {_where(n)}{n.source}{n.as_target}: {n.reason}" for n in approximated]
    if refused:
        lines.append("# not converted:")
        lines += [f"#   {_where(n)}{n.source}: {n.reason}" for n in refused]
    return "\n".join(lines) + "\n"


def _where(note: FieldNote) -> str:
    if note.line is None:
        return ""
    return f"{note.file}:{note.line}: " if note.file else f"line {note.line}: "


def _sources(notes: list[FieldNote]) -> dict[str, list[str]]:
    """TrainJob path → the source paths whose values went there (list items' targets are their list's)."""
    out: dict[str, list[str]] = {}
    for note in notes:
        if note.target and note.verdict != "refused":
            target = note.target.split("[]", 1)[0]
            label = note.source + (" (approximated)" if note.verdict == "approximated" else "")
            if label not in out.setdefault(target, []):
                out[target].append(label)
    return out


def _comment(path: tuple[str | int, ...], sources: dict[str, list[str]], pad: str, head: str) -> tuple[str, list[str]]:
    """(the comment at the end of the value's line, the comment lines above it). Every source is named: when
    they do not fit after the value (`head`, the line so far), they go above it, one a line, never cut."""
    found = sources.get(dotted(path)) if path else None
    if not found:
        return "", []
    inline = f"  # from {', '.join(found)}"
    if len(found) <= _MAX_SOURCES and len(head) + len(inline) <= _COMMENT_WIDTH:
        return inline, []
    return "", _above(found, pad)


def _above(found: list[str], pad: str) -> list[str]:
    """Comment lines naming each source, one a line."""
    last = len(found) - 1
    return [f"{pad}# {'from' if i == 0 else '    '} {src}{',' if i < last else ''}" for i, src in enumerate(found)]


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _is_flat(value: Any) -> bool:
    if isinstance(value, dict | list):
        return not value or (isinstance(value, list) and all(not isinstance(v, dict | list) for v in value))
    return True


def _mapping(
    data: dict[str, Any], path: tuple[str | int, ...], indent: int, sources: dict[str, list[str]]
) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for key, value in data.items():
        here = (*path, key)
        head = f"{pad}{_scalar(key)}:"
        if _is_flat(value):
            head += f" {_scalar(value)}"
        inline, above = _comment(here, sources, pad, head)
        lines += [*above, head + inline]
        if not _is_flat(value):
            lines += _node(value, here, indent + 2, sources)
    return lines


def _node(value: Any, path: tuple[str | int, ...], indent: int, sources: dict[str, list[str]]) -> list[str]:
    if isinstance(value, dict):
        return _mapping(value, path, indent, sources)
    pad = " " * indent
    lines: list[str] = []
    for i, item in enumerate(value):
        if _is_flat(item):
            lines.append(f"{pad}- {_scalar(item)}")
            continue
        inner = _node(item, (*path, i), indent + 2, sources)
        first = next(j for j, line in enumerate(inner) if not line.lstrip().startswith("#"))
        lines += _above(sources.get(dotted((*path, i))) or [], pad)  # the sources of the item as a whole
        lines += inner[:first]  # comment lines of the item's first key: above the `- ` that starts it
        lines.append(f"{pad}- {inner[first].lstrip()}")
        lines += inner[first + 1 :]
    return lines


__all__ = ["commented_yaml"]
