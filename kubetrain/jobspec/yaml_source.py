"""YAML → plain data, remembering the file and line of every value, so errors can point at them.

Differences from `yaml.safe_load`, each to avoid losing or silently changing what the user wrote:
- duplicate keys are errors (safe_load keeps the last one);
- only `true`/`false` are booleans (YAML 1.1 also turns yes/no/on/off into booleans: `country: NO`);
- dates stay strings; anchors are expanded but bounded (no "billion laughs").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import FieldError, Path, SpecError

_MAX_NODES = 200_000
MAX_DEPTH = 64
"""Deepest nesting a document may have. A job spec is a few levels deep; PyYAML's composer and the builder
recurse per level, so a bound here turns a hostile file into an error instead of a RecursionError."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans and no timestamp conversion."""


_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class YamlInt(int):
    """An integer read from YAML that remembers how it was written (`010`, `0x1F`, `1_000`)."""

    source: str


class YamlFloat(float):
    """A float read from YAML that remembers how it was written (`1.10`)."""

    source: str


NO_LOCATION = ("", 0)
"""Marks data that came from no file (a dict passed in Python), so a template's lines are not blamed."""


@dataclass
class Located:
    """Data plus where each path came from: {path: (file, line)}."""

    data: Any
    where: dict[Path, tuple[str, int]] = field(default_factory=dict)
    """Line of each key (where an error about its value points)."""
    body: dict[Path, tuple[str, int]] = field(default_factory=dict)
    """First line of each mapping's contents (where a missing field of it belongs)."""

    def line_of(self, path: Path) -> tuple[str | None, int | None]:
        for end in range(len(path), -1, -1):
            hit = self.where.get(path[:end]) if end == len(path) else self.body.get(path[:end])
            hit = hit or self.where.get(path[:end])
            if hit == NO_LOCATION:
                return None, None
            if hit:
                return hit
        return None, None


def parse_yaml(text: str, source: str) -> list[Located]:
    """Every document in `text`, each with its locations."""
    try:
        _check_depth(text, source)
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([FieldError((), f"not valid YAML: {problem}", file=source, line=line)]) from None
    docs = []
    for node in nodes:
        if node is None or _empty(node):
            continue
        builder = _Builder(source)
        data = builder.build(node, ())
        docs.append(Located(data, builder.where, builder.body))
    return docs


def _empty(node: yaml.Node) -> bool:
    """A document with nothing in it: a `---` that ends a file (as many repositories write them), or one with
    only comments. kubectl skips these; so does kubetrain."""
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null" and node.value == ""


def _check_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing: PyYAML's composer recurses per level, its
    parser does not, so the events are counted first."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise SpecError([FieldError((), f"nested too deeply (more than {MAX_DEPTH} levels)",
                                            file=source, line=line)])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.where: dict[Path, tuple[str, int]] = {}
        self.body: dict[Path, tuple[str, int]] = {}
        self.count = 0
        self.constructor = _Loader("")
        self.open: set[int] = set()
        """Nodes being built on the current path: an alias to one of them would recurse for ever."""

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if self.count > _MAX_NODES:
            raise SpecError([FieldError(path, "document too large (aliases expand too far)", file=self.source)])
        line = node.start_mark.line + 1
        if len(path) > MAX_DEPTH:
            raise SpecError([FieldError(path[:MAX_DEPTH], f"nested too deeply (more than {MAX_DEPTH} levels)",
                                        file=self.source, line=line)])
        if id(node) in self.open:
            raise SpecError([FieldError(path, "an alias refers to a node that contains it (a recursive anchor)",
                                        file=self.source, line=line)])
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self.open.add(id(node))
            try:
                return self._build_collection(node, path)
            finally:
                self.open.discard(id(node))
        self.where.setdefault(path, (self.source, line))
        self.body[path] = (self.source, line)
        return self._scalar(node, path)

    def _build_collection(self, node: yaml.MappingNode | yaml.SequenceNode, path: Path) -> Any:
        self.where.setdefault(path, (self.source, node.start_mark.line + 1))
        self.body[path] = (self.source, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            self.constructor.flatten_mapping(node)  # resolves `<<` merge keys as safe_load does
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self._key(key_node, path)
                if key in result:
                    raise SpecError(
                        [
                            FieldError(
                                (*path, key), "is given twice", file=self.source, line=key_node.start_mark.line + 1
                            )
                        ]
                    )
                # An error about a value points at its key's line (a block mapping's value starts below it).
                self.where.setdefault((*path, key), (self.source, key_node.start_mark.line + 1))
                result[key] = self.build(value_node, (*path, key))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]

    def _key(self, node: yaml.Node, path: Path) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise SpecError(
                [FieldError(path, "keys must be plain text", file=self.source, line=node.start_mark.line + 1)]
            )
        value = self._scalar(node, path)
        return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)

    def _scalar(self, node: yaml.Node, path: Path) -> Any:
        try:
            value = self.constructor.construct_object(node, deep=True)
            if isinstance(value, int) and not isinstance(value, bool):
                wrapped: Any = YamlInt(value)
            elif isinstance(value, float):
                wrapped = YamlFloat(value)
            else:
                return value
            wrapped.source = node.value
            return wrapped
        except yaml.YAMLError as exc:
            raise SpecError(
                [FieldError(path, f"cannot read value: {exc}", file=self.source, line=node.start_mark.line + 1)]
            ) from None


def parse_scalar(text: str) -> Any:
    """A `--set` value: YAML, so `4` is a number, `[a, b]` a list, `true` a boolean, anything else text."""
    try:
        docs = parse_yaml(text, "--set")
    except SpecError:
        return text
    return docs[0].data if docs else None
