"""`kubetrain convert FILE`: the TrainJob equivalent of a DeepSpeedJob, TrainingWorkload, Kubeflow job, JobSet or
Volcano Job, each value's source field named in a comment; what was approximated or not converted is listed at
the end and on stderr. `--strict` refuses (exit 2) a file with any field kubetrain does not convert.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..options import add_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        metavar="FILE",
        help="a foreign job file (DeepSpeedJob, TrainingWorkload, Kubeflow job, JobSet, Volcano Job); every document "
        "of it is converted (-o json: one JSON document, a list when there are several)"
        "; '-' reads stdin (its relative paths and templates then resolve against the current folder)",
    )
    add_output(p, ["yaml", "json"], "yaml")
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 2) when a field of the file is not converted, each listed with the reason",
    )


def run(args: argparse.Namespace) -> int:
    from ...foreign.commented_yaml import commented_yaml
    from ...foreign.loader import load_job_documents

    documents = load_job_documents(args.file, strict=args.strict)
    out: list[str] = []
    as_json: list[dict[str, Any]] = []
    for job, conversion in documents:
        if conversion is None:
            print(f"note: {args.file}: {job.name} is already a TrainJob", file=sys.stderr)
        else:
            for line in conversion.warnings():
                print(f"warning: {line}", file=sys.stderr)
        if args.output == "json":
            as_json.append(job.to_dict())
        elif conversion is None:
            from ..output import dump

            out.append(dump(job.to_dict(), "yaml"))
        else:
            out.append(commented_yaml(conversion))
    if args.output == "json":  # one JSON document: the job, or the list of them for a file of several
        sys.stdout.write(json.dumps(as_json[0] if len(as_json) == 1 else as_json, indent=2) + "\n")
    else:
        sys.stdout.write("---\n".join(out))
    return 0
