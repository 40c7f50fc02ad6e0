"""`kubetrain run`: a job from a file or from a command line, attached (default) or detached."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from .errors import CliError
from .output import emit, say

if TYPE_CHECKING:
    from ..jobspec import TrainJob


def quick_document(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainJob that `kubetrain run --framework F --replicas N -- PROGRAM ARGS` stands for."""
    command: list[str] = args.command
    if not command:
        raise CliError("nothing to run: give a job file, or a program after --", EXIT_USAGE)
    if Path(command[0]).name.startswith("python"):
        rest = command[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            run: dict[str, Any] = {"module": rest[1:]}
            stem = rest[1].rsplit(".", 1)[-1]
        elif rest:
            run = {"python": rest}
            stem = Path(rest[0]).stem
        else:
            raise CliError("python needs a script or -m module", EXIT_USAGE)
    else:
        run = {"exec": command}
        stem = Path(command[0]).name
    name = args.name or (re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")[:40] or "job")
    spec: dict[str, Any] = {"framework": args.framework or "generic", "run": run}
    if args.replicas is not None:
        spec["replicas"] = args.replicas
    if args.procs_per_replica is not None:
        ppr = args.procs_per_replica
        spec["procsPerReplica"] = int(ppr) if ppr.isdigit() else ppr
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def preload_modules(text: str | None) -> list[str] | None:
    """`--preload torch,numpy` → the modules; 'none' or '' → []; not given → None (the backend's default)."""
    if text is None:
        return None
    modules = [m.strip() for m in text.split(",") if m.strip() and m.strip() != "none"]
    for m in modules:
        if not all(part.isidentifier() for part in m.split(".")):
            raise CliError(f"--preload: {m!r} is not a module name (give e.g. torch or torch,numpy)", EXIT_USAGE)
    return modules


def load_job(args: argparse.Namespace) -> tuple[TrainJob, Path]:
    from ..jobspec import from_dict, load_file

    if args.file and args.command:
        raise CliError("give a job file or a program after --, not both", EXIT_USAGE)
    if args.file:
        quick = [f for f in ("framework", "replicas", "procs_per_replica", "name") if getattr(args, f) is not None]
        if quick:
            flags = ", ".join("--" + f.replace("_", "-") for f in quick)
            raise CliError(
                f"{flags} only apply to the quick form; with a file use --set, e.g. --set spec.replicas=4", EXIT_USAGE
            )
        path = Path(args.file)
        return load_file(path, overrides=args.overrides), path.parent
    return from_dict(quick_document(args), overrides=args.overrides), Path.cwd()


def run(args: argparse.Namespace) -> int:
    from . import k8s_cmds

    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.run(args)
    if args.dry_run == "server":
        raise CliError("--dry-run=server asks a Kubernetes API server: add --backend kubernetes", EXIT_USAGE)
    job, base_dir = load_job(args)
    from ..backends.local.backend import LocalBackend

    if args.dry_run:
        from ..backends.local.backend import local_plan

        plan = local_plan(job, job.name, Path("<job-dir>/files"))
        emit(plan.to_dict(), args.output or "yaml")
        return 0
    backend = LocalBackend()
    job_id, plan = backend.create(job, base_dir, preload=preload_modules(args.preload))
    for warning in plan.warnings:
        say(f"warning: {warning}", quiet=args.quiet)
    status = backend.status(job_id)
    if status.phase.value == "Suspended":
        say(f"job {job_id} created paused; start it with: kubetrain resume {job_id}", quiet=args.quiet)
        print(job_id)
        return 0
    if args.detach:
        backend.start_detached(job_id)
        print(job_id)
        return 0
    return _attached(backend, job_id, plan, quiet=args.quiet)


def _attached(backend: Any, job_id: str, plan: Any, *, quiet: bool) -> int:
    from ..terminal import OutputSink

    keys = [p.key for p in plan.processes]
    roles = ", ".join(f"{w.role}×{w.replicas}" for w in plan.roles)
    say(f"job {job_id}: {len(keys)} process{'es' if len(keys) != 1 else ''} ({roles}); Ctrl-C cancels", quiet=quiet)
    started = time.monotonic()
    sink = OutputSink(keys=keys)
    phase = backend.run_attached(job_id, sink, on_event=lambda text: say(f"kubetrain: {text}", quiet=quiet))
    sink.flush()
    status = backend.status(job_id)
    took = time.monotonic() - started
    if phase.value == "Succeeded":
        say(f"job {job_id} succeeded in {took:.1f}s", quiet=quiet)
        return 0
    if phase.value == "Cancelled":
        say(f"job {job_id} cancelled", quiet=quiet)
        return EXIT_INTERRUPTED
    if phase.value == "Suspended":  # `kubetrain suspend` from another shell: the job waits, nothing failed
        say(f"job {job_id} suspended; continue it with: kubetrain resume {job_id}", quiet=quiet)
        return 0
    if status.first_failure is not None:
        print(status.first_failure.explain(job_id), file=sys.stderr)
    else:
        say(f"job {job_id} {phase.value.lower()}: {status.reason or ''} {status.message or ''}".rstrip())
    say(f"logs: kubetrain logs {job_id}    details: kubetrain describe {job_id}", quiet=quiet)
    return EXIT_FAILED
