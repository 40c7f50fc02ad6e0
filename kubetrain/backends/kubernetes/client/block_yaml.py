"""The block YAML kubeconfigs are written in, read without PyYAML (whose import, ~8 ms, compiles large regexes: 5% of
a `kubetrain status` of a thousand pods).

``kubectl config``, client-go, kind, minikube, k3s and PyYAML's ``safe_dump`` write a kubeconfig as block mappings
and sequences of plain or quoted scalars. :func:`load` reads exactly that, and answers None for anything else (flow
collections but ``{}`` and ``[]``, block scalars, anchors, tags, escapes, a scalar that PyYAML would read as a float,
a date or an octal, wrapped lines, tabs, several documents): the caller then reads the file with PyYAML's safe
loader. What it reads, it reads as PyYAML's safe loader does (the tests compare both on many files).
"""

from __future__ import annotations

import re
from typing import Any

#: YAML 1.1's booleans and nulls, as PyYAML's resolver has them.
_BOOLS = {"yes": True, "Yes": True, "YES": True, "no": False, "No": False, "NO": False,
          "true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
          "on": True, "On": True, "ON": True, "off": False, "Off": False, "OFF": False}
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
#: What PyYAML reads as a float, an int (octal, hexadecimal, binary, base 60) or a date, from its resolver: a plain
#: scalar starting with a digit, a sign or a dot that matches none of them is a string.
_NUMBER_OR_DATE = re.compile(r"""(?:
    [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)
    |[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    |[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[\ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
     (?:[\ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?
    )$""", re.X)
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)$")
#: First characters of a plain scalar that start another construct (or need PyYAML's reading).
_SPECIAL_START = frozenset("[]{}!&*|>%@`#,?:\"'<=")


class _Unsupported(Exception):
    """Beyond the block subset: PyYAML reads it."""


def _plain(text: str) -> Any:
    """A plain scalar resolved as PyYAML's safe loader resolves it, or _Unsupported."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    first = text[0]
    if first == "-" and (len(text) == 1 or text[1] == " "):
        raise _Unsupported(text)  # a sequence entry where a value was expected
    if first in _SPECIAL_START or ": " in text or text.endswith(":") or " #" in text or "\t" in text:
        raise _Unsupported(text)
    if first in "0123456789+-.":
        if _DECIMAL.match(text):
            return int(text)
        if _NUMBER_OR_DATE.match(text):
            raise _Unsupported(text)  # a float, an octal, a date, a time in base 60...: PyYAML's to read
    return text


def _scalar(text: str) -> Any:
    """A value written on its line (its comment already cut, when plain)."""
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if text[:1] == "'":
        end = len(text) - 1
        if end < 1 or text[end] != "'":
            raise _Unsupported(text)
        inner = text[1:end]
        if "'" in inner.replace("''", ""):
            raise _Unsupported(text)
        return inner.replace("''", "'")
    if text[:1] == '"':
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != '"' or '"' in inner or "\\" in inner:
            raise _Unsupported(text)
        return inner
    return _plain(text)


def _cut_comment(text: str) -> str:
    """The text before a comment (`` #``), for a plain or a quoted value with nothing after its closing quote."""
    if text[:1] in ("'", '"'):
        close = text.rfind(text[0])
        tail = text[close + 1:]
        if close > 0 and tail.strip() and not tail.lstrip().startswith("#"):
            raise _Unsupported(text)
        return text[:close + 1] if close > 0 else text
    cut = text.find(" #")
    return (text[:cut] if cut >= 0 else text).rstrip()


def _split_key(content: str) -> tuple[Any, str] | None:
    """``key: rest`` → (key, rest); None when the line is not a mapping entry."""
    if content[:1] in ("'", '"'):
        close = content.find(content[0], 1)
        if close < 0 or content[close + 1:close + 2] != ":" or content[close + 2:close + 3] not in ("", " "):
            return None
        return _scalar(content[:close + 1]), content[close + 2:].strip()
    at = content.find(": ")
    if at < 0:
        if not content.endswith(":"):
            return None
        at = len(content) - 1
    key = _plain(content[:at].rstrip())
    if not isinstance(key, str):
        raise _Unsupported(content)  # a key PyYAML reads as a bool, a number or null
    return key, content[at + 1:].strip()


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines: list[tuple[int, str]] = []
        for raw in text.split("\n"):
            line = raw.rstrip("\r").rstrip(" ")
            if not line.isprintable():  # control characters (PyYAML refuses some), tabs: PyYAML's to judge
                raise _Unsupported(line)
            stripped = line.lstrip(" ")
            if not stripped or stripped.startswith("#"):
                continue
            if "\t" in line[: len(line) - len(stripped) + 1] or stripped.startswith(("---", "...", "%")):
                raise _Unsupported(line)
            self.lines.append((len(line) - len(stripped), stripped))

    def node(self, i: int, indent: int) -> tuple[Any, int]:
        content = self.lines[i][1]
        if content == "-" or content.startswith("- "):
            return self.sequence(i, indent)
        return self.mapping(i, indent)

    def _nested(self, i: int, indent: int, *, sequence_here: bool) -> tuple[Any, int]:
        """The value of an entry with nothing after its colon or dash (line ``i`` - 1): the block below it."""
        if i < len(self.lines):
            deeper, content = self.lines[i]
            if deeper > indent:
                return self.node(i, deeper)
            if sequence_here and deeper == indent and (content == "-" or content.startswith("- ")):
                return self.sequence(i, indent)  # `key:` then `- item` at the key's own indent, as kubectl writes it
        return None, i

    def mapping(self, i: int, indent: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        while i < len(self.lines):
            at, content = self.lines[i]
            if at < indent:
                break
            if at > indent or content == "-" or content.startswith("- "):
                raise _Unsupported(content)
            entry = _split_key(content)
            if entry is None:
                raise _Unsupported(content)
            key, rest = entry
            if key in out:
                raise _Unsupported(content)
            rest = _cut_comment(rest) if rest else rest
            if rest:
                out[key] = _scalar(rest)
                i += 1
            else:
                out[key], i = self._nested(i + 1, indent, sequence_here=True)
        return out, i

    def sequence(self, i: int, indent: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        while i < len(self.lines):
            at, content = self.lines[i]
            if at < indent:
                break
            if at > indent or not (content == "-" or content.startswith("- ")):
                if at == indent:
                    break  # the mapping this sequence was the value of goes on
                raise _Unsupported(content)
            rest = content[1:].lstrip(" ")
            if not rest:
                item, i = self._nested(i + 1, indent, sequence_here=False)
            elif rest.startswith("-"):
                raise _Unsupported(content)  # a sequence in a sequence, on one line
            elif _split_key(rest) is not None:
                inner = indent + len(content) - len(rest)  # the mapping's entries line up with its first
                self.lines[i] = (inner, rest)
                item, i = self.mapping(i, inner)
            else:
                item = _scalar(_cut_comment(rest))
                i += 1
            out.append(item)
        return out, i


def load(text: str) -> Any:
    """The document, if it is written in the block subset; else None (read it with PyYAML)."""
    if text.startswith("\ufeff"):
        return None
    try:
        reader = _Reader(text)
        if not reader.lines:
            return {}
        if reader.lines[0][0] != 0:
            return None
        value, end = reader.node(0, 0)
        return value if end == len(reader.lines) else None
    except (_Unsupported, ValueError, IndexError):
        return None


__all__ = ["load"]
