"""Label and field selectors, with the server's grammar and its 400 answers on bad input."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ApiError, bad_request

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")
_OP_RE = re.compile(r"^([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(.*)$")

Matcher = Callable[[Mapping[str, str]], bool]


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )`` (set-based values contain commas)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _check_key(key: str, whole: str) -> None:
    if not _KEY_RE.match(key) or len(key.split("/")[-1]) > 63:
        raise bad_request(f'unable to parse requirement: invalid label key "{key}" in selector "{whole}"')


def _check_value(value: str, whole: str) -> None:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise bad_request(f'unable to parse requirement: invalid label value "{value}" in selector "{whole}"')


def _requirement(req: str, whole: str) -> Matcher:
    if not req:
        raise bad_request(f'unable to parse requirement: empty requirement in selector "{whole}"')
    if req.startswith("!"):
        key = req[1:].strip()
        _check_key(key, whole)
        return lambda labels: key not in labels
    m = _SET_RE.match(req)
    if m:
        key, op, raw = m.group(1), m.group(2), m.group(3)
        _check_key(key, whole)
        values = {v.strip() for v in raw.split(",")} if raw.strip() else set()
        for v in values:
            _check_value(v, whole)
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: key not in labels or labels[key] not in values
    m = _OP_RE.match(req)
    if m:
        key, op, value = m.group(1), m.group(2), m.group(3).strip()
        _check_key(key, whole)
        if op in ("<", ">"):
            try:
                bound = int(value)
            except ValueError:
                raise bad_request(f'unable to parse requirement: "{value}" is not an integer') from None

            def compare(labels: Mapping[str, str]) -> bool:
                try:
                    have = int(labels[key])
                except (KeyError, ValueError):
                    return False
                return have > bound if op == ">" else have < bound

            return compare
        _check_value(value, whole)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    _check_key(req, whole)
    return lambda labels: req in labels


def parse_label_selector(selector: str | None) -> Matcher:
    """A predicate over a labels dict. Empty or missing selects everything."""
    if not selector or not selector.strip():
        return lambda labels: True
    reqs = [_requirement(r, selector) for r in _split_top_level(selector)]
    return lambda labels: all(r(labels) for r in reqs)


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares against; missing fields compare as ``""``."""
    if path == "source":  # Event's selectable "source" is source.component
        path = "source.component"
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(selector: str | None, supported: tuple[str, ...]) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate over an object. Only ``supported`` fields (plus metadata.name/namespace) are allowed."""
    if not selector or not selector.strip():
        return lambda obj: True
    allowed = {"metadata.name", "metadata.namespace", *supported}
    reqs: list[tuple[str, bool, str]] = []
    for raw in selector.split(","):
        raw = raw.strip()
        m = re.match(r"^([^=!\s]+)\s*(==|=|!=)\s*(.*)$", raw)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{raw}'")
        field, op, value = m.group(1), m.group(2), m.group(3).strip()
        if field not in allowed:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        reqs.append((field, op == "!=", value))
    return lambda obj: all((field_value(obj, f) != v) if neg else (field_value(obj, f) == v) for f, neg, v in reqs)
