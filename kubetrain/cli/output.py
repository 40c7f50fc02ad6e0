"""Printing data the way kubectl does: `-o yaml|json`."""

from __future__ import annotations

import json
import sys
from typing import Any


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120))


def emit(data: Any, fmt: str) -> None:
    sys.stdout.write(dump(data, fmt))


def say(text: str, *, quiet: bool = False) -> None:
    """kubetrain's own messages go to stderr, so stdout carries only the replicas' output."""
    if not quiet:
        print(text, file=sys.stderr, flush=True)
