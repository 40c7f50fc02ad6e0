"""`kubetrain render`: Kubernetes manifests for a job, printed (the GitOps dry run)."""

from __future__ import annotations

import argparse
import sys

from .output import dump


def render(args: argparse.Namespace) -> int:
    from ..backends.kubernetes.render import render_job
    from ..spec import load_file

    job = load_file(args.file, overrides=args.overrides)
    objects, warnings = render_job(job, args.flavor, args.namespace)
    for warning in warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    if args.output == "json":
        sys.stdout.write(dump({"apiVersion": "v1", "kind": "List", "items": objects}, "json"))
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, width=120))
    return 0
