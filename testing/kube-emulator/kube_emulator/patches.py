"""The three PATCH formats: JSON merge patch, (simplified) strategic merge patch, JSON patch.

None of these functions mutates its inputs: stored objects are shared, read-only snapshots.

Strategic merge patch is simplified: the merge key of a list is looked up by the list's *field name*
(``containers``/``env``/``volumes`` by ``name``, container ``ports`` by ``containerPort``, service
``ports`` by ``port``, ``volumeMounts`` by ``mountPath``, ``conditions`` by ``type``, ...), not by the
OpenAPI path. Lists without a merge key are replaced, as upstream does for atomic lists. The
``$patch: replace|delete`` and ``$deleteFromPrimitiveList/<field>`` directives are honoured;
``$setElementOrder`` and ``$retainKeys`` are accepted and ignored.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
    "readinessGates": "conditionType",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
# Primitive lists with patchStrategy "merge": the patch's values are added to the existing ones.
_MERGED_PRIMITIVE_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _list_merge_key(field: str, path: tuple[str, ...]) -> str | None:
    if field == "ports":
        return "containerPort" if any(p in ("containers", "initContainers") for p in path) else "port"
    return _MERGE_KEYS.get(field)


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith(("$setElementOrder/", "$retainKeys")):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = set(value or [])
            result[field] = [v for v in result.get(field) or [] if v not in drop]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value, (*path, key))
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, (*path, key))
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(field: str, current: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    if field in _MERGED_PRIMITIVE_LISTS:
        return list(current) + [v for v in patch if v not in current]
    key = _list_merge_key(field, path)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return copy.deepcopy(patch)
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [copy.deepcopy(x) for x in patch if x.get("$patch") != "replace"]
    out = list(current)
    for item in patch:
        idx = next((i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append(copy.deepcopy(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item, path)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _failed(message: str) -> ApiError:
    return ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {message}")


def _parent(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise _failed(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
    return cur, parts[-1]


def _get(doc: Any, parts: list[str], op: str) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _failed(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")


def _remove(doc: Any, parts: list[str], op: str) -> Any:
    _get(doc, parts, op)
    parent, last = _parent(doc, parts, op)
    return parent.pop(int(last) if isinstance(parent, list) else last)


def _add(doc: Any, parts: list[str], value: Any, op: str) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _failed(f"{op} operation does not apply: index {last} out of range")
    else:
        raise _failed(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation: {op!r}")
        name, parts = op["op"], _pointer(op["path"])
        if name == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), name)
        elif name == "remove":
            _remove(doc, parts, name)
        elif name == "replace":
            _get(doc, parts, name)
            if parts:
                _remove(doc, parts, name)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), name)
        elif name in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = _remove(doc, src, name) if name == "move" else copy.deepcopy(_get(doc, src, name))
            doc = _add(doc, parts, value, name)
        elif name == "test":
            if _get(doc, parts, name) != op.get("value"):
                raise _failed(f"testing value /{'/'.join(parts)} failed")
        else:
            raise bad_request(f"unknown JSON patch operation {name!r}")
    return doc
