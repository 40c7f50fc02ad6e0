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

from ...contract.choices import FLAVORS
from ..options import add_backend, add_overrides, backend_of, backend_options, relaxation_lines
from ..output import plural, say

if TYPE_CHECKING:
    from ...backends.base import BackendOptions, Problem, Verdict
    from ...foreign.conversion import Conversion
    from ...jobspec import TrainJob


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="job files: TrainJobs, or foreign kinds kubetrain converts (DeepSpeedJob, TrainingWorkload, "
                   "Kubeflow jobs, JobSet, Volcano Job; docs/foreign.md)"
                   "; '-' reads stdin (its relative paths and templates then resolve against the current folder)")
    add_overrides(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no output on success")
    p.add_argument("--flavor", choices=FLAVORS,
                   help="with --backend kubernetes: only this flavor (default: every flavor, saying which can run it)")
    add_backend(p, "validate",
                help_text="also check what this backend makes of the job: its refusals and warnings, all at once")


def run(args: argparse.Namespace) -> int:
    from ...foreign.loader import load_job_documents
    from ...jobspec import SpecError
    from ...jobspec.load import source_name

    options = _options(args)
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
            if options is None:  # with a backend, the backend's report says it (once)
                for line in relaxation_lines(job, conversion, None):
                    print(f"warning: {line}", file=sys.stderr)
            elif not _check(options, path, job, conversion, quiet=args.quiet):
                failed += 1
    if options is not None and not args.quiet:
        lines, note = options.survey()  # on Kubernetes, with a cluster to ask: what it can run
        for line in lines:
            print(line)
        if note:
            print(f"note: {note}", file=sys.stderr)
    return 2 if failed else 0


def _options(args: argparse.Namespace) -> BackendOptions | None:
    """The options of the backend to check against: `--backend`'s, or the backend whose options have a flavor
    when only `--flavor` is given; None for the schema alone."""
    import dataclasses

    from ...backends.base import options_classes
    from ...contract.errors import UsageError

    def has_flavors(cls: type[BackendOptions]) -> bool:
        return "flavor" in {f.name for f in dataclasses.fields(cls)}

    owner = next(cls for cls in options_classes().values() if has_flavors(cls))
    if args.backend is None:
        return backend_options(args, owner.backend) if args.flavor is not None else None
    options = backend_options(args, backend_of(args))
    if args.flavor is not None and not has_flavors(type(options)):
        raise UsageError(f"--flavor is a {owner.title} flavor: use it with --backend {owner.backend}")
    return options


def _check(options: BackendOptions, path: str, job: TrainJob, conversion: Conversion | None, *, quiet: bool) -> bool:
    """Report what the backend makes of `job`, each way it could run it (each flavor): False when it refuses it
    (every way refuses)."""
    verdicts = options.verdicts(job)
    able = [one.backend for one in verdicts if not one.refused]
    extra = relaxation_lines(job, conversion, options)  # where no pod runs the template: said once
    # A warning several ways give (a pod template's security relaxations, say) is printed once, naming them.
    given_by: dict[str, list[str]] = {}
    for one in verdicts:
        for warning in dict.fromkeys(one.warnings) if not one.refused else ():
            given_by.setdefault(warning, []).append(one.backend)
    for one in verdicts:  # a refusal is an error when no way can run the job
        own = [w for w in one.warnings if len(given_by.get(w, ())) == 1]
        _report(path, one.label, job, one, conversion, quiet=quiet, fatal=not able, warnings=[*own, *extra])
    kind = verdicts[0].kind if verdicts else "backend"
    shared: dict[tuple[str, ...], list[str]] = {}
    for warning, names in given_by.items():
        if len(names) > 1:
            shared.setdefault(tuple(names), []).append(warning)
    for ways, common in shared.items():
        say(f"{path}: {kind}s {', '.join(ways)} each give {plural(len(common), 'warning')}:")
        for warning in common:
            say(f"  warning: {conversion.at_source(warning) if conversion else warning}")
    if len(verdicts) > 1:
        which = ", ".join(able) if able else "none"
        message = f"{path}: {kind}s that can run {job.name}: {which}"
        if able:
            say(message, quiet=quiet)
        else:
            print(f"error: {message}", file=sys.stderr)
    return bool(able)


def _report(
    path: str,
    backend: str,
    job: TrainJob,
    seen: Verdict,
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
    for warning in warnings:  # a foreign file's: at the source field and line the setting came from
        say(f"  warning: {conversion.at_source(warning) if conversion else warning}")


def _problem_text(problem: Problem, conversion: Conversion | None) -> str:
    """A refusal as printed: for a foreign file, at the source field and line it came from (the TrainJob path in
    parentheses), as `render` and `run` say it."""
    if conversion is None:
        return str(problem)
    from ...foreign.walker import parse_path
    from ...jobspec.errors import FieldError

    error = FieldError(parse_path(problem.path), problem.message, hint=problem.hint)
    return str(conversion.to_source([error])[0])
