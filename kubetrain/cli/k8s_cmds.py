"""The job verbs on the Kubernetes backend (`--backend kubernetes`, alias `k8s`): same verbs, same output."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..contract.errors import EXIT_USAGE
from .errors import CliError
from .output import emit, log_filters, print_jobs, print_records, say

if TYPE_CHECKING:
    from ..backends.kubernetes.backend import KubernetesBackend

BACKEND_NAMES = ("kubernetes", "k8s")


def wants_kubernetes(args: argparse.Namespace) -> bool:
    return getattr(args, "backend", "local") in BACKEND_NAMES


def _backend(args: argparse.Namespace) -> KubernetesBackend:
    from ..backends.kubernetes.backend import KubernetesBackend

    return KubernetesBackend(
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        namespace=getattr(args, "namespace", None),
    )


def run(args: argparse.Namespace) -> int:
    from ..terminal import OutputSink
    from .run_cmd import load_job

    job, _base_dir = load_job(args)
    if args.dry_run == "client":
        raise CliError(
            "--dry-run=client on Kubernetes is `kubetrain render`; use --dry-run=server to ask the API server",
            EXIT_USAGE,
        )
    with _backend(args) as backend:
        result = backend.run(
            job,
            flavor=args.flavor,
            dry_run_server=args.dry_run == "server",
            detach=args.detach,
            sink=OutputSink(),
            on_event=lambda text: say(f"kubetrain: {text}", quiet=args.quiet),
        )
        for warning in result.warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
        if result.dry_run is not None:
            if args.output:
                emit(result.dry_run.to_dict(), args.output)
            else:
                print(result.dry_run.format())
            return result.exit_code
        if args.detach:
            print(result.name)
            return 0
        status = result.status
        if status is not None and status.first_failure is not None and result.exit_code == 1:
            print(status.first_failure.explain(result.name), file=sys.stderr)
        elif status is not None:
            say(f"job {result.name} {status.phase.value.lower()}", quiet=args.quiet)
        return result.exit_code


def list_jobs(args: argparse.Namespace) -> int:
    with _backend(args) as backend:
        print_jobs(backend.list(all_namespaces=args.all_namespaces), args.output)
    return 0


def status(args: argparse.Namespace) -> int:
    with _backend(args) as backend:
        description = backend.describe(args.job)
    if args.output:
        emit(description.status.to_dict(), args.output)
    else:
        print("\n".join(description.status_lines()))
    return 0


def describe(args: argparse.Namespace) -> int:
    with _backend(args) as backend:
        description = backend.describe(args.job)
    if args.output:
        emit(description.to_dict(), args.output)
    else:
        print(description.text())
    return 0


def logs(args: argparse.Namespace) -> int:
    from ..terminal import OutputSink

    since, grep = log_filters(args)
    with _backend(args) as backend:
        records = backend.logs(
            args.job,
            follow=args.follow,
            role=args.role,
            index=args.index,
            tail=args.tail,
            since=since,
            grep=grep,
            previous=args.previous,
            on_missing=lambda replica, why: say(f"kubetrain: {replica}: {why}"),
        )
        print_records(records, args, OutputSink())
    return 0


def each(args: argparse.Namespace, verb: str) -> int:
    from ..backends.kubernetes.client import KubernetesError

    failed = 0
    with _backend(args) as backend:
        for name in args.jobs:
            try:
                if verb == "delete":
                    backend.delete(name)
                    print(f"job {name} deleted")
                else:
                    st = getattr(backend, verb)(name)
                    print(f"job {name} {st.phase.value.lower()}")
            except KubernetesError as exc:
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
    return 1 if failed else 0
