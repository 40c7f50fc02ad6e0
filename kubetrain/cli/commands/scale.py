"""`kubetrain scale`: change the number of workers of a running elastic job."""

from __future__ import annotations

import argparse

from ..options import add_backend, open_backend_for


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Change the number of workers of a running elastic job (spec.elastic), within its minReplicas and "
        "maxReplicas. The workers added start and join the job's rendezvous; those removed (the highest "
        "indexes) are stopped gracefully, and the others carry on with the new count, as torchrun's elastic "
        "agent does. On Kubernetes: an Indexed Job's completions and parallelism are patched together, a "
        "Kubeflow job's Worker replicas; other engines refuse, saying why."
    )
    p.epilog = "example: kubetrain scale demo-x7k2 --replicas 3"
    p.add_argument("job", metavar="ID", help="job id (locally, an unambiguous prefix will do)")
    p.add_argument("--replicas", type=_count, required=True, metavar="N", help="the number of workers wanted")
    add_backend(p, "scale")


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        status = backend.scale(args.job, args.replicas)
    print(f"job {status.job_id} scaled to {args.replicas} worker{'s' if args.replicas != 1 else ''}")
    return 0
