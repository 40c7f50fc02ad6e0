"""The TrainJob JSON Schema (for editors, `kubetrain schema`) and field lookup for `kubetrain explain`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .kube_models import kube_json_schema
from .model import TrainJob


def full_json_schema() -> dict[str, Any]:
    """pydantic's schema with every `x-kube-type` marker replaced by the client model's own fields."""
    schema = TrainJob.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    kube_defs: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "x-kube-type" in node:
                resolved = kube_json_schema(node["x-kube-type"], kube_defs)
                if node["x-kube-type"] == "list[V1EnvVar]":  # also the {NAME: value} shorthand
                    resolved = {"anyOf": [resolved, {"type": "object", "additionalProperties": {}}]}
                return {**{k: v for k, v in node.items() if k != "x-kube-type"}, **resolved}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    schema = walk(schema)
    schema["$defs"].update(kube_defs)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "TrainJob (kubetrain.dev/v1alpha1)"
    del defs
    return schema


@dataclass(frozen=True)
class FieldDoc:
    path: str
    type: str
    description: str
    default: Any
    has_default: bool
    fields: list[tuple[str, str, str]]
    """(name, type, first line of description) of the children."""


def explain(path: str, schema: dict[str, Any] | None = None) -> FieldDoc:
    """Describe the field at `path` ("spec.resources.gpu"); the root when empty. A segment under a map is
    one of its keys, any name, as kubectl explain walks maps: `spec.roles.worker.podTemplate`."""
    schema = schema or full_json_schema()
    defs = schema.get("$defs", {})
    parts = [p for p in path.split(".") if p] if path else []
    node, walked = _walk(schema, parts, [], defs)
    resolved = _deref(node, defs)
    children = [
        (name, type_name(sub, defs), _first_line(_deref(sub, defs).get("description") or sub.get("description", "")))
        for name, sub in _properties(node, defs).items()
    ]
    return FieldDoc(
        path=".".join(walked) or "TrainJob",
        type=type_name(node, defs),
        description=node.get("description") or resolved.get("description", ""),
        default=node.get("default"),
        has_default="default" in node,
        fields=children,
    )


def _walk(
    node: dict[str, Any], parts: list[str], walked: list[str], defs: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The schema node at `parts` below `node`. A segment is a field first (so `spec.roles.replicas` stays
    the field every role has, as before), else, under a map, one of its keys: `spec.roles.worker`. Where
    both readings exist and the field's leads nowhere (a role named `env`: `spec.roles.env.image`), the
    key's is tried; if neither resolves, the field's error is the one told."""
    if not parts:
        return node, walked
    part, rest = parts[0], parts[1:]
    props = _properties(node, defs)
    value = _map_value(node, defs)
    if part in props:
        try:
            return _walk(props[part], rest, [*walked, part], defs)
        except SpecError:
            if value is None:
                raise
            try:
                return _walk(value, rest, [*walked, part], defs)
            except SpecError:
                pass
            raise  # the field's reading's error: what explain said before maps were walked
    if value is not None:
        return _walk(value, rest, [*walked, part], defs)
    from .errors import did_you_mean

    guess = did_you_mean(part, props)
    where = ".".join(walked) or "TrainJob"
    hint = f"did you mean '{guess}'?" if guess else f"fields of {where}: {', '.join(props) or 'none'}"
    raise SpecError.single((*walked, part), "no such field", hint=hint)


def _map_value(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a map's values when `node` is (or may be) a map of objects with fields, e.g.
    `spec.roles` → RoleSpec. A key of a map of text or of anything (labels, env's {NAME: value}) names
    no field, so it is not walked: `spec.env.image` stays "no such field"."""
    node = _deref(node, defs)
    for key in ("anyOf", "oneOf"):
        for sub in node.get(key, []):
            value = _map_value(sub, defs)
            if value is not None:
                return value
    extra = node.get("additionalProperties")
    if node.get("type") == "object" and isinstance(extra, dict) and "properties" not in node:
        return extra if _properties(extra, defs) else None
    return None


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in node and seen < 20:
        node = defs[node["$ref"].split("/")[-1]]
        seen += 1
    return node


def _members(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    node = _deref(node, defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            out = []
            for sub in node[key]:
                out += _members(sub, defs)
            return out
    if node.get("type") == "array" and "items" in node:
        return _members(node["items"], defs)
    if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
        return _members(node["additionalProperties"], defs)
    return [node]


def _properties(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for member in _members(node, defs):
        props.update(member.get("properties", {}))
    return props


def type_name(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in node:
        target = _deref(node, defs)
        return str(target.get("title", node["$ref"].split("/")[-1]))
    for key in ("anyOf", "oneOf"):
        if key in node:
            names = [type_name(s, defs) for s in node[key] if s.get("type") != "null"]
            return " | ".join(dict.fromkeys(names))
    if "const" in node:
        return repr(node["const"])
    if "enum" in node:
        return " | ".join(str(v) for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        return f"[]{type_name(node.get('items', {}), defs)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
        return f"map[string]{type_name(node['additionalProperties'], defs) or 'any'}"
    return str(kind or "any")


def _first_line(text: str) -> str:
    return text.strip().split("\n")[0] if text else ""
