"""`kubetrain render`: a job's Kubernetes manifests, printed (the GitOps dry run; no cluster needed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...contract.choices import DEFAULT_FLAVOR
from ..options import DEFAULT_FLAVOR_HELP, add_flavor, add_output, add_overrides


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        metavar="FILE",
        help="job file: a TrainJob or a foreign kind kubetrain converts (docs/foreign.md); every document of it "
        "is rendered; '-' reads stdin (its relative paths and templates then resolve against the current folder)",
    )
    add_flavor(p, default=DEFAULT_FLAVOR, help_text=DEFAULT_FLAVOR_HELP)
    p.add_argument("-n", "--namespace", help="namespace of the objects")
    add_overrides(p)
    add_output(p, ["yaml", "json"], "yaml")


def run(args: argparse.Namespace) -> int:
    from ...backends.kubernetes.render import dump, render_manifests
    from ..options import errors_at_source, load_job_sources

    # every document of the file, as kubectl takes them: TrainJobs, and foreign kinds converted
    objects: list[dict[str, Any]] = []
    for job, conversion in load_job_sources(args.file, overrides=args.overrides):
        with errors_at_source(conversion):
            rendered = render_manifests(job, args.flavor, args.namespace)
        objects += rendered.objects
        for warning in rendered.warnings:  # a foreign file's: at the source field and line the setting came from
            print(f"WARNING: {conversion.at_source(warning) if conversion else warning}", file=sys.stderr)
    sys.stdout.write(dump(objects, args.output))
    return 0
