"""validate, explain, schema, version."""

from __future__ import annotations

import argparse
import json
import sys

from .output import say


def validate(args: argparse.Namespace) -> int:
    from ..jobspec import SpecError, load_all_files

    failed = 0
    for path in args.files:
        try:
            jobs = load_all_files([path], overrides=args.overrides)
        except SpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        for job in jobs:
            spec = job.spec
            replicas = sum(spec.role_replicas().values())
            roles = ", ".join(f"{r}×{n}" for r, n in spec.role_replicas().items())
            say(
                f"{path}: valid TrainJob {job.name} ({spec.framework.value}, {replicas} replicas: {roles})",
                quiet=args.quiet,
            )
    return 2 if failed else 0


def explain(args: argparse.Namespace) -> int:
    from ..jobspec.schema import explain as explain_field

    doc = explain_field(args.field)
    lines = [f"FIELD:    {doc.path} <{doc.type}>"]
    if doc.has_default and doc.default is not None:
        lines.append(f"DEFAULT:  {json.dumps(doc.default)}")
    if doc.description:
        lines += ["", "DESCRIPTION:", *("    " + line for line in doc.description.strip().splitlines())]
    if doc.fields:
        width = max(len(name) for name, _, _ in doc.fields)
        lines += ["", "FIELDS:"]
        for name, type_name, text in doc.fields:
            lines.append(f"    {name.ljust(width)}  <{type_name}>")
            if text:
                lines.append(f"    {' ' * width}    {text}")
    print("\n".join(lines))
    return 0


def schema(args: argparse.Namespace) -> int:
    from ..jobspec.schema import full_json_schema

    print(json.dumps(full_json_schema(), indent=2))
    return 0


def version(args: argparse.Namespace) -> int:
    from importlib.metadata import version as pkg_version

    print(f"kubetrain {pkg_version('kubetrain')}")
    return 0
