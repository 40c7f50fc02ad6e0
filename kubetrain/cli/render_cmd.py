"""`kubetrain render`: Kubernetes manifests for a job, printed (the GitOps dry run)."""

from __future__ import annotations

import argparse
import sys


def render(args: argparse.Namespace) -> int:
    from ..backends.kubernetes.render import dump, render_job
    from ..jobspec import load_file

    job = load_file(args.file, overrides=args.overrides)
    objects, warnings = render_job(job, args.flavor, args.namespace)
    for warning in warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    sys.stdout.write(dump(objects, args.output))
    return 0
