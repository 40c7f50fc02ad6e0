"""`kubetrain validate`: check job files (TrainJobs and the foreign kinds kubetrain converts), every problem with
its field path and file:line.

Without `--backend`, the files are checked against the schema. With `--backend local|kubernetes` (and
`--flavor`, else every flavor), each job also meets what that backend would make of it, in one pass and
before anything runs: every refusal at once (a flavor's render problems, the local backend's), the
warnings of what is honoured only approximately, and the fields the backend would drop without a word
(docs/parity.md). Exit 2 when a backend refuses (without `--flavor`: when no flavor can run the job), else 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ...contract.choices import BACKEND_ALIASES, BACKENDS, FLAVORS
from ..options import add_cluster, add_overrides, open_backend_for, relaxation_lines
from ..output import plural, say

if TYPE_CHECKING:
    from ...backends.parity.observe import Observation, Problem
    from ...foreign.base import Conversion
    from ...jobspec import TrainJob


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="job files: TrainJobs, or foreign kinds kubetrain converts (DeepSpeedJob, TrainingWorkload, "
                   "Kubeflow jobs, JobSet, Volcano Job; docs/foreign.md)"
                   "; '-' reads stdin (its relative paths and templates then resolve against the current folder)")
    add_overrides(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no output on success")
    p.add_argument("--backend", choices=[*BACKENDS, *BACKEND_ALIASES],
                   help="also check what this backend makes of the job: its refusals and warnings, all at once")
    p.add_argument("--flavor", choices=FLAVORS,
                   help="with --backend kubernetes: only this flavor (default: every flavor, saying which can run it)")
    add_cluster(p)


def run(args: argparse.Namespace) -> int:
    from ...contract.errors import UsageError
    from ...foreign.loader import load_job_documents
    from ...jobspec import SpecError
    from ...jobspec.load import source_name

    backend = _backend(args)
    if args.flavor is not None and backend == "local":
        raise UsageError("--flavor is a Kubernetes flavor: use it with --backend kubernetes")
    failed = 0
    for file in args.files:
        path = source_name(file)  # `-` is shown as <stdin>
        try:
            # TrainJobs, and foreign kinds (DeepSpeedJob, TrainingWorkload, ...) converted
            jobs = load_job_documents(file, overrides=args.overrides)
        except SpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        for job, conversion in jobs:
            spec = job.spec
            replicas = sum(spec.role_replicas().values())
            roles = ", ".join(f"{r}×{n}" for r, n in spec.role_replicas().items())
            what = "TrainJob" if conversion is None else f"{conversion.kind} (as a TrainJob)"
            say(
                f"{path}: valid {what} {job.name} ({spec.framework.value}, {plural(replicas, 'replica')}: {roles})",
                quiet=args.quiet,
            )
            for line in conversion.warnings() if conversion is not None else ():
                print(f"warning: {line}", file=sys.stderr)
            if backend is None:  # with a backend, the backend's report says it (once)
                for line in relaxation_lines(job, conversion, None):
                    print(f"warning: {line}", file=sys.stderr)
            if backend is not None and not _check(backend, path, job, args.flavor, conversion, quiet=args.quiet):
                failed += 1
    if backend == "kubernetes" and not args.quiet:
        _cluster_report(args)
    return 2 if failed else 0


def _cluster_report(args: argparse.Namespace) -> None:
    """With a cluster to ask (a kubeconfig: --kubeconfig, --context, $KUBECONFIG or ~/.kube/config): what it can run,
    engine by engine, and which only have their CRDs. Validation needs no cluster: one not reached is a note."""
    import os
    from pathlib import Path

    from ...backends.kubernetes.client.retry import RetryPolicy

    home_config = (Path.home() / ".kube" / "config").is_file()
    if not (args.kubeconfig or args.context or os.environ.get("KUBECONFIG") or home_config):
        return
    try:
        with open_backend_for(args, retry=RetryPolicy(attempts=1)) as cluster:
            lines = cluster.engines()  # type: ignore[attr-defined]
    except Exception as exc:  # validation stands without a cluster
        print(f"note: no cluster asked what it can run ({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    print("what this cluster can run:")
    for line in lines:
        print(f"  {line}")


def _backend(args: argparse.Namespace) -> str | None:
    if args.backend is None:
        return "kubernetes" if args.flavor is not None else None
    from ...backends.base import backend_name

    return backend_name(args.backend)


def _check(
    backend: str, path: str, job: TrainJob, flavor: str | None, conversion: Conversion | None, *, quiet: bool
) -> bool:
    """Report what `backend` makes of `job`; False when it refuses it."""
    if backend == "local":
        return _check_local(path, job, conversion, quiet=quiet)
    return _check_kubernetes(path, job, flavor, conversion, quiet=quiet)


def _check_local(path: str, job: TrainJob, conversion: Conversion | None, *, quiet: bool) -> bool:
    from ...backends.parity.observe import observe_local

    seen = observe_local(job)
    warnings = [*seen.warnings, *relaxation_lines(job, conversion, "local")]
    _report(path, "the local backend", job, seen, conversion, quiet=quiet, fatal=True, warnings=warnings)
    return not seen.refused


def _check_kubernetes(
    path: str, job: TrainJob, flavor: str | None, conversion: Conversion | None, *, quiet: bool
) -> bool:
    from ...backends.parity.observe import observe_flavor

    seen = [observe_flavor(job, name) for name in ([flavor] if flavor is not None else FLAVORS)]
    able = [one.backend for one in seen if not one.refused]
    # A warning several flavors give (a pod template's security relaxations, say) is printed once, naming them.
    flavors_of: dict[str, list[str]] = {}
    for one in seen:
        for warning in one.warnings if not one.refused else ():
            flavors_of.setdefault(warning, []).append(one.backend)
    for one in seen:  # a flavor's refusal is an error when no flavor can run the job
        own = [w for w in one.warnings if len(flavors_of.get(w, ())) == 1]
        _report(path, f"flavor {one.backend}", job, one, conversion, quiet=quiet, fatal=not able, warnings=own)
    shared: dict[tuple[str, ...], list[str]] = {}
    for warning, names in flavors_of.items():
        if len(names) > 1:
            shared.setdefault(tuple(names), []).append(warning)
    for flavors, common in shared.items():
        say(f"{path}: flavors {', '.join(flavors)} each give {plural(len(common), 'warning')}:")
        for warning in common:
            say(f"  warning: {warning}")
    if flavor is None:
        which = ", ".join(able) if able else "none"
        message = f"{path}: flavors that can run {job.name}: {which}"
        if able:
            say(message, quiet=quiet)
        else:
            print(f"error: {message}", file=sys.stderr)
    return bool(able)


def _report(
    path: str,
    backend: str,
    job: TrainJob,
    seen: Observation,
    conversion: Conversion | None,
    *,
    quiet: bool,
    fatal: bool,
    warnings: list[str] | None = None,
) -> None:
    """A backend's refusals (always printed; `fatal`: as an error), else its warnings and the fields it
    would drop silently (`warnings`: those to print here, when some are printed elsewhere)."""
    if seen.refused:
        count = f"{len(seen.problems)} problems" if len(seen.problems) > 1 else "1 problem"
        lines = [f"{'error: ' if fatal else ''}{path}: {backend} refuses {job.name} ({count}):"]
        lines += ["  " + _problem_text(problem, conversion).replace("\n", "\n  ") for problem in seen.problems]
        print("\n".join(lines), file=sys.stderr)
        return
    if warnings is None:
        warnings = list(seen.warnings)  # the local ones include the fields it does not use (docs/parity.md)
    say(f"{path}: {backend} runs {job.name}" + (f", with {len(warnings)} warning(s):" if warnings else ""),
        quiet=quiet and not warnings)
    for warning in warnings:
        say(f"  warning: {warning}")


def _problem_text(problem: Problem, conversion: Conversion | None) -> str:
    """A refusal as printed: for a foreign file, at the source field and line it came from (the TrainJob path in
    parentheses), as `render` and `run` say it."""
    if conversion is None:
        return str(problem)
    from ...foreign.base import parse_path
    from ...jobspec.errors import FieldError

    error = FieldError(parse_path(problem.path), problem.message, hint=problem.hint)
    return str(conversion.to_source([error])[0])
