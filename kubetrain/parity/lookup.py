"""What a job sets, as the table names it, and the runtime lookup the local backend makes of the table: the
fields a job sets that a backend does not use (`unused_warnings`), said once per reason at run time and in
`kubetrain validate`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .cells import IGNORED, KUBERNETES, VERDICTS, Row
from .table import ROWS


def set_fields(document: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(schema path, path in the document, value) of every field a job document sets, as the table names
    them: `spec.roles.worker.image` is the job's `spec.image` field at the role's path."""

    def walk(node: Any, schema_path: str, path: str) -> Iterator[tuple[str, str, Any]]:
        yield schema_path, path, node
        if isinstance(node, dict) and not _opaque(schema_path):
            for key, value in node.items():
                if schema_path == "spec.roles":
                    yield from walk(value, "spec.roles.*", f"{path}.{key}")
                elif schema_path == "spec.roles.*":
                    name = "spec.roles.*.replicas" if key == "replicas" else f"spec.{key}"
                    yield from walk(value, name, f"{path}.{key}")
                else:
                    yield from walk(value, f"{schema_path}.{key}" if schema_path else key,
                                    f"{path}.{key}" if path else key)
        elif isinstance(node, list) and schema_path.endswith(("mounts", "ports")):
            for i, item in enumerate(node):
                if not isinstance(item, dict):
                    continue
                item_path = f"{schema_path}[type={item.get('type')}]" if schema_path.endswith("mounts") else (
                    f"{schema_path}[]")
                if schema_path.endswith("mounts"):
                    yield item_path, f"{path}[{i}]", item
                for key, value in item.items():
                    if key != "type":
                        yield from walk(value, f"{item_path}.{key}", f"{path}[{i}].{key}")

    yield from walk(dict(document), "", "")


def _opaque(schema_path: str) -> bool:
    return schema_path.split(".")[-1] in _OPAQUE


_OPAQUE = {"labels", "annotations", "nodeSelector", "affinity", "requests", "limits", "extendedResources",
           "capabilities", "items", "env", "envFrom", "tolerations", "run", "podTemplate"}


def rows_for(document: Mapping[str, Any], backend: str, verdicts: tuple[str, ...] = VERDICTS) -> Iterator[
        tuple[Row, str]]:
    """(row, path in the document) of each field the document sets whose cell on `backend` has one of
    `verdicts`: the row of its value, else the field's row without a value. A value that asks for nothing
    (false, empty) sets nothing."""
    by_field: dict[str, list[Row]] = {}
    for r in ROWS:
        by_field.setdefault(r.field, []).append(r)
    for schema_path, path, value in set_fields(document):
        if value is False or value is None or value == {} or value == []:
            continue
        rows = by_field.get(schema_path, [])
        chosen = [r for r in rows if r.when and r.matches(value)] or [r for r in rows if not r.when]
        for r in chosen[:1]:
            if r.cell_at(backend, path).verdict in verdicts:
                yield r, path


def unused_warnings(document: Mapping[str, Any], backend: str) -> list[str]:
    """One warning per reason for the fields `document` sets that `backend` does not use (its `ignored`
    cells), each naming the fields: `not used locally (no scheduler locally: ...): spec.nodeSelector`."""
    dropped: dict[str, list[str]] = {}  # why → the fields, each once (not a mount's fields after the mount)
    for r, where in rows_for(document, backend, (IGNORED,)):
        paths = dropped.setdefault(r.cell_at(backend, where).note, [])
        if not any(where.startswith((p + ".", p + "[")) for p in paths):
            paths.append(where)
    return [f"not used {_ON[backend]} ({why}): {', '.join(paths)}" for why, paths in dropped.items()]


_ON = {"local": "locally", **{flavor: f"by the {flavor} flavor" for flavor in KUBERNETES}}
"""Each column of the table, as its warning says where a field is not used."""


__all__ = ["rows_for", "set_fields", "unused_warnings"]
