"""list, status, describe, logs, cancel, delete, suspend, resume, attach — for jobs of the local backend."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ..contract.errors import EXIT_USAGE
from . import k8s_cmds
from .errors import CliError
from .output import emit, log_filters, print_jobs, print_records, say

if TYPE_CHECKING:
    from ..backends.local.backend import LocalBackend


def _backend() -> LocalBackend:
    from ..backends.local.backend import LocalBackend

    return LocalBackend()


def list_jobs(args: argparse.Namespace) -> int:
    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.list_jobs(args)
    print_jobs(_backend().list(limit=args.limit), args.output)
    return 0


def status(args: argparse.Namespace) -> int:
    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.status(args)
    backend = _backend()
    job = backend.status(backend.resolve(args.job))
    if args.output:
        emit(job.to_dict(), args.output)
        return 0
    print(job.summary_line())
    for replica in job.replicas:
        exit_text = replica.describe_exit()
        print(f"  {replica.name:<16} {replica.phase.value:<10} {exit_text}")
    if job.first_failure is not None and job.phase.value == "Failed":
        print(job.first_failure.explain(job.job_id))
    return 0


def describe(args: argparse.Namespace) -> int:
    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.describe(args)
    from ..status import format_describe

    backend = _backend()
    job_id = backend.resolve(args.job)
    job = backend.status(job_id)
    if args.output:
        data = job.to_dict()
        data["spec"] = json.loads(backend.store.get_spec_json(job_id))
        emit(data, args.output)
        return 0
    print(format_describe(job))
    return 0


def logs(args: argparse.Namespace) -> int:
    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.logs(args)
    from ..backends.local.logfiles import follow_log, merge_logs
    from ..terminal import OutputSink

    backend = _backend()
    job_id = backend.resolve(args.job)
    if args.index is not None and args.role is None:
        raise CliError("--index needs --role", EXIT_USAGE)
    paths = backend.log_paths(job_id, args.role, args.index)
    if not paths:
        what = f"role {args.role}" + (f" index {args.index}" if args.index is not None else "")
        raise CliError(f"job {job_id} has no replica matching {what}")
    since, grep = log_filters(args)
    if args.follow:
        records = follow_log(paths, lambda: _ended(backend, job_id), since=since, tail=args.tail, grep=grep)
    else:
        records = merge_logs(paths, since=since, tail=args.tail, grep=grep)
    print_records(records, args, OutputSink(keys=list(paths)))
    return 0


def _ended(backend: LocalBackend, job_id: str) -> bool:
    phase = backend.status(job_id).phase
    return phase.is_terminal or phase.value == "Suspended"


def _each(args: argparse.Namespace, verb: str) -> int:
    if k8s_cmds.wants_kubernetes(args):
        return k8s_cmds.each(args, verb)
    backend = _backend()
    failed = 0
    for prefix in args.jobs:
        try:
            job_id = backend.resolve(prefix)
            if verb in ("cancel", "suspend"):
                st = backend.cancel(job_id) if verb == "cancel" else backend.suspend(job_id)
                if not st.phase.is_terminal and st.phase.value != "Suspended":
                    print(
                        f"error: job {job_id} is still {st.phase.value.lower()}: its supervisor has not stopped "
                        "it yet (a replica stuck in the kernel?); the request stands, check with: "
                        f"kubetrain status {job_id}",
                        file=sys.stderr,
                    )
                    failed += 1
                    continue
                print(f"job {job_id} {st.phase.value.lower()}")
            elif verb == "resume":
                backend.resume(job_id)
                print(f"job {job_id} resumed")
            else:
                backend.delete(job_id)
                print(f"job {job_id} deleted")
        except Exception as exc:  # report each job's problem, go on with the others
            from ..backends.local.backend import LocalError
            from ..backends.local.store import StoreError

            if not isinstance(exc, StoreError | LocalError):
                raise
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def cancel(args: argparse.Namespace) -> int:
    return _each(args, "cancel")


def delete(args: argparse.Namespace) -> int:
    return _each(args, "delete")


def suspend(args: argparse.Namespace) -> int:
    return _each(args, "suspend")


def resume(args: argparse.Namespace) -> int:
    return _each(args, "resume")


def attach(args: argparse.Namespace) -> int:
    """A shell with one replica's environment and working directory; prints the program it would run."""
    import shlex

    backend = _backend()
    job_id = backend.resolve(args.job)
    plan = json.loads(backend.store.get_plan_json(job_id) or "{}")
    procs = [(p, r) for r in plan.get("replicas", []) for p in r["processes"]]
    if not procs:
        raise CliError(f"job {job_id} has no replica processes")
    chosen = next((pr for pr in procs if pr[0]["key"] == args.replica), None) if args.replica else procs[0]
    if chosen is None:
        keys = ", ".join(p["key"] for p, _ in procs)
        raise CliError(f"no replica {args.replica!r} in job {job_id}; replicas: {keys}")
    proc, _replica = chosen
    argv = [sys.executable if proc["argv"][0] == "python" else proc["argv"][0], *proc["argv"][1:]]
    command = shlex.join(argv)
    env = {**os.environ, **proc["env"]}
    cwd = plan.get("cwd") or os.getcwd()
    if args.print:
        for name, value in sorted(proc["env"].items()):
            print(f"export {name}={shlex.quote(value)}")
        print(f"cd {shlex.quote(cwd)}")
        print(command)
        return 0
    say(f"replica {proc['key']} of {job_id}: its environment is set; run its program with:\n  {command}")
    shell = os.environ.get("SHELL", "/bin/sh")
    os.chdir(cwd)
    os.execvpe(shell, [shell], env)
