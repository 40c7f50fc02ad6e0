"""Bounds on what a grep expression costs to prepare, checked before it is compiled.

The web view's grep is compiled with the `regex` module (it can stop a search that takes too long: see
`ui/app.py` `TimedGrep`), which expands a repeat's minimum count into that many copies of what it
repeats: `a{4294967294}` asked for 5-8 GB before any other limit applied, and `(?:a{1000}){1000}` as much
as `a{1000000}`. Python's `re` (the CLI's grep) keeps a count as a count: its compile stays small.

`expanded_size` is a budget over the parsed expression (parsed by `re`, which judges the syntax for both):
one piece per node, a repeat's body counted `max(min, 1)` times, nested repeats multiplying. Measured against
what `regex` allocates, a piece costs it 100-400 bytes and well under a microsecond to compile (shapes from
`a{n}` to `(?:(a)|b){n}`; character classes are counted per member, so they overcount); `MAX_PIECES` keeps a
compile under ~40 MB and ~0.1 s. One shape is far dearer: a capture group that holds nothing, `()`, costs
`regex` time cubic in how many there are (2,000: 0.07 s; 10,000: 15 s), so it counts `EMPTY_GROUP` pieces.

Nesting is bounded first (`MAX_NESTING`): both parsers recurse per group, and a few hundred levels end in a
RecursionError (a traceback in the CLI, a failed request in the web view).
"""

from __future__ import annotations

from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MAX_PIECES = 100_000
"""Pieces an expression may expand to (see the module's docstring for what one costs)."""
EMPTY_GROUP = 100
"""Pieces an empty capture group `()` counts for: `regex` compiles many of them in cubic time."""
MAX_NESTING = 50
"""Groups inside groups, at most."""

REPEATS = frozenset(
    op for op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)) if op is not None
)


class GrepRefused(ValueError):
    """An expression refused before it is compiled: the message says what is wrong and what to change,
    without naming the field (the caller does: `grep:` on the page, `--grep` in the CLI)."""


def nesting(text: str) -> int:
    """How deep groups are nested in `text`: parentheses outside character classes and escapes."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":  # a class: `]` right after `[` or `[^` is a member, not its end
            i += 1
            if i < n and text[i] == "^":
                i += 1
            if i < n and text[i] == "]":
                i += 1
            while i < n and text[i] != "]":
                i += 2 if text[i] == "\\" else 1
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(depth - 1, 0)
        i += 1
    return deepest


def expanded_size(text: str) -> int:
    """The pieces `text` expands to when `regex` compiles it (parsed by `re`: `re.error` if not an expression)."""
    return _pieces(sre_parse.parse(text))


def _pieces(items: Any) -> int:
    total = 0
    for op, av in items:
        if op in REPEATS:
            low, _high, body = av
            total += 1 + max(_pieces(body), 1) * max(low, 1)
        elif op is sre.SUBPATTERN:
            inner = _pieces(av[-1])
            total += 1 + inner if inner or av[0] is None else EMPTY_GROUP
        elif op is sre.BRANCH:
            total += 1 + sum(_pieces(branch) for branch in av[1])
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            total += 1 + _pieces(av[1])
        elif op is sre.GROUPREF_EXISTS:
            total += 1 + _pieces(av[1]) + (_pieces(av[2]) if av[2] else 0)
        elif op is getattr(sre, "ATOMIC_GROUP", None):
            total += 1 + _pieces(av)
        elif op is sre.IN:
            total += 1 + len(av)
        else:
            total += 1
    return total


def check_nesting(text: str) -> None:
    """`GrepRefused` if `text` nests groups deeper than `MAX_NESTING`."""
    deep = nesting(text)
    if deep > MAX_NESTING:
        raise GrepRefused(f"groups nested {deep} deep (at most {MAX_NESTING}): nest fewer parentheses")


def check_size(text: str) -> None:
    """`GrepRefused` if `text` nests too deep or expands past `MAX_PIECES` (`re.error` if it is not an
    expression): called before `regex` compiles it."""
    check_nesting(text)
    try:
        size = expanded_size(text)
    except RecursionError:  # a parser's recursion, despite the nesting bound
        raise GrepRefused(f"groups nested too deep (at most {MAX_NESTING}): nest fewer parentheses") from None
    if size > MAX_PIECES:
        raise GrepRefused(
            f"this expression would take too much memory to prepare: its repeats expand to {size:,} pieces "
            f"(at most {MAX_PIECES:,}): use smaller counts in {{m}} and {{m,n}} (a repeat's minimum is "
            "copied that many times, and nested repeats multiply), or + and *"
        )


__all__ = ["EMPTY_GROUP", "MAX_NESTING", "MAX_PIECES", "GrepRefused", "check_nesting", "check_size", "expanded_size"]
