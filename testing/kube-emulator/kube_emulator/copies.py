"""Copies of stored objects: every object the store hands out or keeps is a copy, so one caller's change is
never another's. Objects are JSON (dicts, lists, strings, numbers, booleans, None): copied by a walk that
knows only those, several times faster than ``copy.deepcopy`` (which also tracks shared references, a thing
JSON cannot have); anything else is left to ``copy.deepcopy``."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

_ATOMS = (str, int, float, bool, type(None))


def clone(obj: T) -> T:
    return _clone(obj)  # type: ignore[no-any-return]


def _clone(obj: Any) -> Any:
    kind = type(obj)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else _clone(v) for k, v in obj.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _clone(v) for v in obj]
    if kind in _ATOMS:
        return obj
    return copy.deepcopy(obj)


__all__ = ["clone"]
