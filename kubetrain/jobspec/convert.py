"""pydantic's validation errors → kubetrain's FieldErrors: the user's field paths, plain messages, hints."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import FieldError, Path, SpecError, did_you_mean


def convert_validation_error(exc: ValidationError, data: Any, root: type[BaseModel]) -> list[FieldError]:
    """pydantic's errors → FieldErrors with the user's field paths (union tags removed) and hints.

    `data` is what `root` was validated from; paths are relative to it.
    """
    out: list[FieldError] = []
    for err in exc.errors():
        loc = _data_path(err["loc"], data)
        error = err.get("ctx", {}).get("error")
        if isinstance(error, SpecError):
            out += [
                FieldError((*loc, *sub.path), sub.message, sub.value, sub.has_value, sub.hint, sub.file, sub.line)
                for sub in error.errors
            ]
            continue
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = _model_at(root, loc[:-1], data)
            # Suggest names in the style of the misspelt one: snake_case from Python, camelCase from YAML.
            snake = "_" in str(loc[-1])
            known = _aliases(parent, snake=snake) if parent is not None else []
            guess = did_you_mean(str(loc[-1]), known) if known else None
            hint = f"did you mean '{guess}'?" if guess else (f"known fields: {', '.join(known)}" if known else None)
            out.append(FieldError(loc, "unknown field", hint=hint))
        elif kind == "union_tag_invalid":
            ctx = err.get("ctx", {})
            out.append(
                FieldError(
                    (*loc, str(ctx.get("discriminator", "type")).strip("'")),
                    f"unknown type {ctx.get('tag')!r}",
                    ctx.get("tag"),
                    False,
                    f"one of {ctx.get('expected_tags')}",
                )
            )
        elif kind == "missing":
            out.append(FieldError(loc, "is required"))
        else:
            message = _message(err)
            given = err.get("input")
            if kind == "int_type" and isinstance(given, bool | float):
                # Strict ints (types.WholeNumber): `true` or `1.0` where a count or a limit belongs.
                shown = str(given).lower() if isinstance(given, bool) else str(getattr(given, "source", given))
                out.append(FieldError(loc, f"must be a whole number (got {shown})", given, False))
                continue
            if kind == "finite_number" and loc and loc[-1] in ("gpu", "gpuLimit"):
                message = "must be a finite gpu count"
            shows_value = kind != "quantity"  # its message already quotes the value
            out.append(FieldError(loc, message, err.get("input"), shows_value, _hint(kind, loc)))
    return _merge(out)


def _merge(errors: list[FieldError]) -> list[FieldError]:
    """Union members fail one by one ("must be an integer", "must be 'auto'"): say it once per field."""
    merged: dict[Path, FieldError] = {}
    for err in errors:
        if err.path in merged and err.path:
            first = merged[err.path]
            if err.message not in first.message:
                merged[err.path] = FieldError(
                    err.path,
                    f"{first.message}, or {_strip_must(err.message)}",
                    first.value,
                    first.has_value,
                    first.hint or err.hint,
                    first.file,
                    first.line,
                )
        else:
            merged[err.path] = err
    return list(merged.values())


def _strip_must(message: str) -> str:
    return message.removeprefix("must be ")


def _message(err: Any) -> str:
    message = str(err["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = message.replace("Input should be", "must be").replace("input should be", "must be")
    message = message.replace(", unable to parse string as an integer", "").replace(
        ", unable to parse string as a number", ""
    )
    if err["type"] == "literal_error" and "expected" in err.get("ctx", {}):
        message = f"must be one of {err['ctx']['expected']}"
    return message


def _hint(kind: str, loc: Path) -> str | None:
    if kind in ("int_type", "int_parsing") and loc and loc[-1] in ("replicas", "backoffLimit"):
        return "a whole number, without quotes"
    return None


def _data_path(loc: tuple[Any, ...], data: Any) -> Path:
    """Drop the parts of pydantic's `loc` that are not in the data (union member tags, 'function-after[...]')."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and node.get("type") == part:
            continue  # the tag of a discriminated union (a mount's type), not a field
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if (isinstance(node, dict) and part in node) or in_list:
            path.append(part)
            node = node[part]
        elif isinstance(part, str) and not _looks_like_tag(part) and (node is None or isinstance(node, dict)):
            path.append(part)  # a missing field: kept, it is what the user must add
            node = None
        elif isinstance(part, str) and hasattr(node, "to_dict") and hasattr(node, part):
            path.append(part)  # an attribute of a client object the field accepts (Kubeflow's V1RunPolicy)
            node = getattr(node, part)
    return tuple(path)


def _looks_like_tag(part: str) -> bool:
    return (
        "[" in part
        or part in ("int", "str", "float", "bool", "list", "dict", "none")
        or part.startswith(("literal", "function-", "tagged-union", "lax-", "json-or-python", "constrained-"))
    )


def _unwrap(annotation: Any) -> list[Any]:
    """Model classes reachable through Optional / list / dict / Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        found = []
        for arg in typing.get_args(annotation):
            found += _unwrap(arg)
        return found
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _model_at(model: type[BaseModel], path: Path, data: Any) -> type[BaseModel] | None:
    """The model class that holds the field at `path`, to suggest the names it knows."""
    current: type[BaseModel] | _DictOf | None = model
    node = data
    for part in path:
        node = _child(node, part)
        if isinstance(current, _DictOf):  # `part` is a free key, such as a role name
            current = current.model
            continue
        if isinstance(part, int) or current is None:  # list item: `current` already is the item's model
            continue
        field = _field_by_alias(current, part)
        if field is None:
            return None
        candidates = _unwrap(field.annotation)
        if isinstance(node, dict) and "type" in node:  # discriminated unions (mounts): pick by tag
            tagged = [c for c in candidates if getattr(c.model_fields.get("type"), "default", None) == node["type"]]
            candidates = tagged or candidates
        found = candidates[0] if candidates else None
        current = _DictOf(found) if found is not None and _is_mapping_field(field.annotation) else found
    return current if isinstance(current, type) else None


class _DictOf:
    """The next path part is a free key (a role name), then comes the model."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model


def _is_mapping_field(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_mapping_field(a) for a in typing.get_args(annotation))
    return origin is dict


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _field_by_alias(model: type[BaseModel], key: Any) -> Any:
    for name, field in model.model_fields.items():
        aliases = {name, field.alias}
        if field.validation_alias is not None and hasattr(field.validation_alias, "choices"):
            aliases |= {str(c) for c in field.validation_alias.choices}
        if key in aliases:
            return field
    return None


def _aliases(model: type[BaseModel], *, snake: bool = False) -> list[str]:
    return [name if snake else field.alias or name for name, field in model.model_fields.items()]
