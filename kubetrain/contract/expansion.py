"""Kubernetes' `$(VAR)` expansion, the one implementation every backend applies.

The kubelet expands env values against the variables defined before them, and a container's `command`
and `args` against its whole env (k8s.io/kubernetes/third_party/forked/golang/expansion): `$$` is a
literal `$`, `$(NAME)` is NAME's value when NAME is defined, and anything else stays as written. The
local backend applies the same rules to env values, so an env list means the same on both; the render
escapes command and args so they arrive as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
"""`$$` (group 1 None) or `$(NAME)` (group 1 the name)."""


def expand(raw: str, env: Mapping[str, str], lookup: Callable[[str], str | None] | None = None) -> str:
    """`raw` as the kubelet expands it against `env` (or `lookup`, when given)."""
    get = lookup or env.get

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return "$"
        value = get(name)
        return m.group(0) if value is None else value

    return REFERENCE.sub(sub, raw)


def references(raw: str) -> set[str]:
    """Names `raw` refers to as `$(NAME)` (an escaped `$$(NAME)` is not a reference)."""
    return {m.group(1) for m in REFERENCE.finditer(raw) if m.group(1)}


def escape(text: str) -> str:
    """`text` escaped against the kubelet's expansion: it arrives exactly as written."""
    return text.replace("$", "$$")


__all__ = ["REFERENCE", "escape", "expand", "references"]
