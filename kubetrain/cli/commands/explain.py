"""`kubetrain explain`: what a field of the TrainJob spec means (like kubectl explain)."""

from __future__ import annotations

import argparse
import json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("field", nargs="?", default="", metavar="FIELD.PATH", help="e.g. spec.resources.gpu")


def run(args: argparse.Namespace) -> int:
    from ...jobspec.schema import explain as explain_field

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
