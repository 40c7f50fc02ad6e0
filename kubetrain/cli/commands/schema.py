"""`kubetrain schema`: the TrainJob JSON Schema, for editor completion and checks."""

from __future__ import annotations

import argparse
import json


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from ...jobspec.schema import full_json_schema

    print(json.dumps(full_json_schema(), indent=2))
    return 0
