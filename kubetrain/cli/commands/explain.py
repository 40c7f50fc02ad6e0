"""`kubetrain explain`: what a field of the TrainJob spec means (like kubectl explain)."""

from __future__ import annotations

import argparse
import json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("field", nargs="?", default="", metavar="FIELD.PATH",
                   help="e.g. spec.resources.gpu; or a DeepSpeedJob, TrainingWorkload, ... file: where each field goes")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ...jobspec.schema import explain as explain_field

    if _looks_like_a_file(args.field):
        if not Path(args.field).is_file():
            from ...contract.errors import UsageError

            raise UsageError(
                f"{args.field}: no such file (explain takes a field path such as spec.resources.gpu, or a job file)"
            )
        return _explain_file(args.field)
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


def _looks_like_a_file(text: str) -> bool:
    """A file name, not a field path: field paths have no `/` and never end in a YAML or JSON suffix."""
    return text.endswith((".yaml", ".yml", ".json")) or ("/" in text and '"' not in text)


def _explain_file(path: str) -> int:
    """`kubetrain explain FILE`: for a foreign job file, where each of its fields goes in the TrainJob."""
    from ...foreign.loader import load_job_documents

    for job, conversion in load_job_documents(path):
        if conversion is None:
            print(f"{path}: {job.name} is a TrainJob; `kubetrain explain spec.FIELD` explains its fields")
            continue
        print(f"{conversion.kind} {job.name} → TrainJob:")
        width = min(64, max(len(n.source) for n in conversion.notes))
        for note in conversion.notes:
            where = note.target or "-"
            reason = f"  ({note.reason})" if note.reason else ""
            print(f"  {note.source.ljust(width)}  {note.verdict:<12}  {where}{reason}")
    return 0
