"""Host names a controller makes resolvable (`<job>-master-0`, `<job>-<task>-0.<job>`), found in text: what the
local backend replaces with a replica's address in env values (and warns of in commands), and what a render
replaces with the flavor's own names."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_NAME_CHARS = "A-Za-z0-9-"


def name_pattern(names: Sequence[str]) -> re.Pattern[str] | None:
    """Any of `names` as a whole host name (not a part of a longer one), the longest first."""
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![{_NAME_CHARS}.])(?:{alternatives})(?![{_NAME_CHARS}]|\.[{_NAME_CHARS}])")


def localize(value: str, hosts: Mapping[str, str], pattern: re.Pattern[str] | None) -> str:
    """`value` with each host name of `hosts` replaced by the address it maps to."""
    return value if pattern is None else pattern.sub(lambda m: hosts[m.group(0)], value)


__all__ = ["localize", "name_pattern"]
