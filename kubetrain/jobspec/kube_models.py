"""Plain dicts ⇄ official `kubernetes` client models (V1EnvVar, V1Affinity, ...), strictly.

The client's own deserializer silently drops keys it does not know (a snake_case key, a typo), which would
lose what the user wrote. This one walks the models' `openapi_types` itself: unknown keys are errors with
a did-you-mean, wrong types name their field path, and both the API's camelCase and the Python client's
snake_case spellings are accepted. The client is imported only when a model is actually needed: it costs
~0.25 s, which `kubetrain --help` must not pay.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import Any

from .errors import FieldError, Path, SpecError, did_you_mean

_LIST = re.compile(r"[lL]ist\[(.+)\]")
_DICT = re.compile(r"[dD]ict[\(\[]([^,]+), (.+)[\)\]]")


@functools.cache
def model_class(type_name: str) -> type:
    import kubernetes.client.models as models

    cls: type = getattr(models, type_name)
    return cls


def to_kube_model(type_name: str, value: Any, path: Path = ()) -> Any:
    """Convert `value` (a dict, or already a model instance) to the client model `type_name`."""
    errors: list[FieldError] = []
    result = _convert(type_name, value, path, errors)
    if errors:
        raise SpecError(errors)
    return result


def _convert(type_name: str, value: Any, path: Path, errors: list[FieldError]) -> Any:
    if value is None:
        return None
    if m := _LIST.fullmatch(type_name):
        if not isinstance(value, list):
            errors.append(FieldError(path, "must be a list", value, True))
            return None
        items = []
        for i, item in enumerate(value):
            if item is None:
                what = m.group(1)
                errors.append(
                    FieldError((*path, i), f"must be a {what}, not empty (null)", hint="remove the empty list item")
                )
                continue
            items.append(_convert(m.group(1), item, (*path, i), errors))
        return items
    if m := _DICT.fullmatch(type_name):
        if not isinstance(value, dict):
            errors.append(FieldError(path, "must be a mapping", value, True))
            return None
        return {str(k): _convert(m.group(2), v, (*path, str(k)), errors) for k, v in value.items()}
    if type_name in _SCALARS:
        return _scalar(type_name, value, path, errors)
    cls = model_class(type_name)
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        errors.append(FieldError(path, f"must be a mapping ({type_name})", value, True))
        return None
    return _build(cls, value, path, errors)


def _build(cls: type, data: dict[Any, Any], path: Path, errors: list[FieldError]) -> Any:
    attribute_map: dict[str, str] = cls.attribute_map  # type: ignore[attr-defined]
    types: dict[str, str] = cls.openapi_types  # type: ignore[attr-defined]
    by_json = {json_key: attr for attr, json_key in attribute_map.items()}
    kwargs: dict[str, Any] = {}
    before = len(errors)
    for key, item in data.items():
        attr = by_json.get(key) or (key if key in attribute_map else None)
        if attr is None:
            guess = did_you_mean(str(key), by_json)
            errors.append(
                FieldError(
                    (*path, str(key)),
                    f"unknown field for {cls.__name__}",
                    hint=f"did you mean '{guess}'?" if guess else f"known fields: {', '.join(sorted(by_json))}",
                )
            )
            continue
        kwargs[attr] = _convert(types[attr], item, (*path, attribute_map[attr]), errors)
    if len(errors) > before:
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        # The client validates required fields in its constructors: recent clients with pydantic errors,
        # older ones with "Invalid value for `name`, must not be `None`". Name the field as the user writes it.
        client_errors = getattr(exc, "errors", None)
        if callable(client_errors):
            for err in client_errors():
                attr = str(err["loc"][0]) if err["loc"] else ""
                json_key = attribute_map.get(attr, attr)
                where = (*path, json_key) if json_key else path
                missing = err["type"] == "missing"
                errors.append(FieldError(where, "is required" if missing else str(err["msg"])))
            return None
        message = str(exc)
        if m := re.search(r"`(\w+)`", message):
            attr = m.group(1)
            json_key = attribute_map.get(attr, attr)
            missing = "must not be `None`" in message
            errors.append(FieldError((*path, json_key), "is required" if missing else message))
        else:
            errors.append(FieldError(path, message))
        return None


_SCALARS = {"str", "int", "bool", "float", "object", "datetime", "date"}


def _scalar(type_name: str, value: Any, path: Path, errors: list[FieldError]) -> Any:
    ok: bool
    if type_name == "str":
        ok = isinstance(value, str)
    elif type_name == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif type_name == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif type_name == "bool":
        ok = isinstance(value, bool)
    elif type_name == "datetime":
        ok = isinstance(value, str | _dt.datetime)
    elif type_name == "date":
        ok = isinstance(value, str | _dt.date)
    else:
        ok = True  # "object": int-or-string and free-form fields
    if not ok:
        errors.append(FieldError(path, f"must be of type {_TYPE_WORDS[type_name]}", value, True))
        return None
    return value


_TYPE_WORDS = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "datetime": "date-time string",
    "date": "date string",
}


def kube_to_dict(obj: Any) -> Any:
    """A model (or a list/dict of them) → plain JSON-able data with the API's camelCase keys."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, list | tuple):
        return [kube_to_dict(o) for o in obj]
    if isinstance(obj, dict):
        return {k: kube_to_dict(v) for k, v in obj.items()}
    if isinstance(obj, _dt.datetime | _dt.date):
        return obj.isoformat()
    attribute_map: dict[str, str] | None = getattr(obj, "attribute_map", None)
    if attribute_map is None:
        raise TypeError(f"cannot serialize {type(obj).__name__}")
    return {
        json_key: kube_to_dict(getattr(obj, attr))
        for attr, json_key in attribute_map.items()
        if getattr(obj, attr) is not None
    }


def kube_json_schema(type_name: str, defs: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema for a client model, from its `openapi_types`, so editors can complete these fields."""
    if m := _LIST.fullmatch(type_name):
        return {"type": "array", "items": kube_json_schema(m.group(1), defs)}
    if m := _DICT.fullmatch(type_name):
        return {"type": "object", "additionalProperties": kube_json_schema(m.group(2), defs)}
    if type_name in _SCALARS:
        return dict(_SCALAR_SCHEMAS[type_name])
    ref = f"k8s.{type_name}"
    if ref not in defs:
        defs[ref] = {}  # placeholder first: models refer to themselves (JSONSchemaProps)
        cls = model_class(type_name)
        defs[ref] = {
            "type": "object",
            "title": type_name,
            "additionalProperties": False,
            "properties": {
                json_key: kube_json_schema(cls.openapi_types[attr], defs)  # type: ignore[attr-defined]
                for attr, json_key in cls.attribute_map.items()  # type: ignore[attr-defined]
            },
        }
    return {"$ref": f"#/$defs/{ref}"}


_SCALAR_SCHEMAS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "object": {},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
}
