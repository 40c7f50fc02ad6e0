"""Manifests as text: YAML documents (what `kubectl apply -f` and GitOps tools read) or JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the start-up script, hostfiles) as `|` blocks, so they read as written."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: Iterable[dict[str, Any]]) -> str:
    """`---`-separated YAML documents, keys in the order written (apiVersion, kind, metadata, spec)."""
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=120, explicit_start=True)


def to_json(objects: Iterable[dict[str, Any]]) -> str:
    """A v1 List, which `kubectl apply -f` takes as one document."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}, indent=2) + "\n"


def dump(objects: Iterable[dict[str, Any]], fmt: str = "yaml") -> str:
    """`fmt`: yaml or json (`kubetrain render -o`)."""
    if fmt == "yaml":
        return to_yaml(objects)
    if fmt == "json":
        return to_json(objects)
    raise ValueError(f"unknown output format {fmt!r}: yaml or json")


__all__ = ["dump", "to_json", "to_yaml"]
