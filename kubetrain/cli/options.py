"""Options several verbs share, and opening the backend they name.

Every job verb takes `--backend local|kubernetes` (alias `k8s`) and the options the backends declare for
it: each backend's `BackendOptions` dataclass (`backends/local/options.py`, `backends/kubernetes/options.py`)
gives every field's flag, help, choices and parser (`backends.base.Option`), so a backend option is one
field there and no line here. The verb's handler then calls only `kubetrain.backends.base.Backend`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shlex
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..contract.choices import BACKEND_ALIASES, BACKENDS, DEFAULT_BACKEND, DEFAULT_FLAVOR, FLAVORS
from ..contract.errors import KubetrainError

if TYPE_CHECKING:
    from ..backends.base import Backend, BackendOptions
    from ..foreign.conversion import Conversion
    from ..jobspec import TrainJob
    from ..jobspec.errors import FieldError


def non_negative(text: str) -> int:
    """An argparse type: a whole number, 0 or more (a negative --tail or --limit is a mistake, not "all")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give 0 or more")
    return value


def add_raw(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--raw",
        action="store_true",
        help="pass replicas' terminal escape sequences and control characters through (default: removed or "
        "shown escaped)",
    )


def add_output(p: argparse.ArgumentParser, choices: Sequence[str], default: str | None = None) -> None:
    p.add_argument("-o", "--output", choices=choices, default=default, help=f"output format: {'|'.join(choices)}")


def add_overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a field of the file as written, e.g. spec.replicas=4 (repeatable); in a foreign kind's "
        "file, that kind's own path, e.g. spec.worker.replicas=3 on a DeepSpeedJob",
    )


def add_flavor(p: argparse.ArgumentParser, *, default: str | None, help_text: str) -> None:
    p.add_argument("--flavor", default=default, choices=FLAVORS, help=help_text)


DEFAULT_FLAVOR_HELP = f"Kubernetes engine to target (default: {DEFAULT_FLAVOR} = Indexed Jobs + headless Service)"

BACKEND_HELP = "where the job runs: local processes (default) or a Kubernetes cluster"


def add_backend(p: argparse.ArgumentParser, verb: str, *, help_text: str = BACKEND_HELP, several: bool = False) -> None:
    """`--backend` (no default: `backend_of` says which when none is named; `several`: repeatable), then every
    option a backend declares for `verb`."""
    p.add_argument(
        "--backend",
        action="append" if several else "store",
        choices=[*BACKENDS, *BACKEND_ALIASES],
        help=help_text,
    )
    add_backend_options(p, verb)


def add_backend_options(p: argparse.ArgumentParser, verb: str) -> None:
    """A flag for each field of each backend's options that `verb` takes, under a heading per backend; its
    value lands in `args.<field>` (`backend_options`)."""
    from ..backends.base import option_of, options_classes

    taken: set[str] = set()
    for cls in options_classes().values():
        group: argparse._ArgumentGroup | None = None
        for f in dataclasses.fields(cls):
            spec = option_of(f)
            if spec is None or not spec.flags or f.name in taken or (spec.verbs is not None and verb not in spec.verbs):
                continue
            taken.add(f.name)
            if group is None:
                group = p.add_argument_group(f"{cls.title} backend")
            if isinstance(f.default, bool):
                group.add_argument(*spec.flags, dest=f.name, action="store_true", help=spec.help)
                continue
            group.add_argument(*spec.flags, dest=f.name, type=spec.parse or str, choices=spec.choices,
                               metavar=spec.metavar, help=spec.help)


def backend_of(args: argparse.Namespace) -> str:
    """The backend `--backend` names (canonical), the default one when none is named."""
    from ..backends.base import backend_name

    named = getattr(args, "backend", None)
    return backend_name(named or DEFAULT_BACKEND)


def backend_options(args: argparse.Namespace, name: str | None = None) -> BackendOptions:
    """The options of backend `name` (default: `backend_of(args)`) from this command line: each field the
    command line has a value for (`add_backend_options`' flags, or a verb's own flag of the same name); the
    others keep their defaults."""
    from ..backends.base import options_class

    cls = options_class(name or backend_of(args))
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if getattr(args, f.name, None) is not None}
    return cls(**given)


def open_backend_for(args: argparse.Namespace) -> Backend:
    """The backend `--backend` names, opened with the options of this command line that apply to it."""
    from ..backends.base import open_backend

    return open_backend(backend_options(args))


def backend_flags(args: argparse.Namespace) -> str:
    """The flags that reach the same job again, for hints such as `kubetrain logs ID --backend kubernetes -n ml`:
    none for the default backend, else `--backend` and the options that say where its jobs are."""
    from ..backends.base import option_of, options_class

    if getattr(args, "backend", None) is None:
        return ""
    name = backend_of(args)
    words = ["--backend", name]
    for f in dataclasses.fields(options_class(name)):
        spec = option_of(f)
        value = getattr(args, f.name, None)
        if spec is not None and spec.locates and spec.flags and value:
            words += [spec.flags[0], str(value)]
    return " " + shlex.join(words)


def load_job_file(path: str, overrides: Sequence[str] = ()) -> TrainJob:
    """The job in `path`: a TrainJob, or a foreign kind (DeepSpeedJob, TrainingWorkload, Kubeflow job, ...)
    converted, with a warning line on stderr for each of its fields approximated or not taken."""
    return load_job_source(path, overrides)[0]


def load_job_source(
    path: str, overrides: Sequence[str] = (), document: int | None = None
) -> tuple[TrainJob, Conversion | None]:
    """`load_job_file`, with the Conversion of a foreign kind (None for a TrainJob), for `errors_at_source`.
    `document` (1-based) picks one job of a file that holds several."""
    from ..foreign.loader import load_job_file as load

    job, conversion = load(path, overrides=overrides, document=document)
    if conversion is not None:
        for line in conversion.warnings():
            print(f"warning: {line}", file=sys.stderr)
    return job, conversion


def load_job_sources(path: str, overrides: Sequence[str] = ()) -> list[tuple[TrainJob, Conversion | None]]:
    """Every job in `path` (as kubectl takes every document of a file), each as `load_job_source` gives it."""
    from ..foreign.loader import load_job_documents

    jobs = load_job_documents(path, overrides=overrides)
    for _, conversion in jobs:
        for line in conversion.warnings() if conversion is not None else ():
            print(f"warning: {line}", file=sys.stderr)
    return jobs


def template_relaxations(
    job: TrainJob, conversion: Conversion | None = None, *, templates_only: bool = False
) -> list[FieldError]:
    """Each security default of kubetrain's that `job` relaxes on Kubernetes (hostNetwork, privileged, uid 0, a
    host folder, ...), whether a pod template or a typed setting asks for it (`jobspec.relaxations`' one list):
    `spec.podTemplate.spec.hostNetwork: RELAXES ...`; for a foreign file, at the source field the setting came
    from, with its line. Said without a backend too: the file asks for it wherever it runs. `templates_only`: those
    of pod templates (the typed settings' are each backend's to say)."""
    from ..jobspec.errors import FieldError
    from ..jobspec.relaxations import PREFIX, job_relaxations

    errors = [
        FieldError(path, f"{PREFIX} on Kubernetes: {found.what}")
        for path, found in job_relaxations(job)
        if not templates_only or "podTemplate" in path
    ]
    if conversion is not None:
        errors = conversion.to_source(errors)
    return errors


def relaxation_lines(job: TrainJob, conversion: Conversion | None, options: BackendOptions | None) -> list[str]:
    """What to say of the job's security relaxations before a backend speaks: with no backend, each one; for a
    backend that runs pods (`BackendOptions.pod_templates`), nothing (its render says each, per setting);
    locally, once, that they are not used (the program runs on this machine, as the user, with no pod at
    all)."""
    found = template_relaxations(job, conversion, templates_only=options is not None)
    if not found or (options is not None and options.pod_templates):
        return []
    if options is not None:
        from ..jobspec.errors import format_path

        fields = ", ".join(dict.fromkeys(format_path(error.path) for error in found))
        return [f"not used locally: the pod template's security settings ({fields}); the program runs on this "
                "machine, as you"]
    return [str(error) for error in found]


@contextlib.contextmanager
def errors_at_source(conversion: Conversion | None) -> Iterator[None]:
    """Field-pathed errors raised inside (a render's refusal, the local backend's) pointed at the foreign file's
    own fields and lines: the user wrote `spec.config.run` on line 6, not the TrainJob's `spec.run`."""
    try:
        yield
    except KubetrainError as exc:
        from ..jobspec.errors import FieldError

        errors = getattr(exc, "errors", None)
        if conversion is None or not isinstance(errors, list) or not all(isinstance(e, FieldError) for e in errors):
            raise
        located = type(exc)(conversion.to_source(errors))  # SpecError and LocalRefusal take their errors
        raise located from None


__all__ = [
    "BACKEND_HELP",
    "DEFAULT_FLAVOR_HELP",
    "add_backend",
    "add_backend_options",
    "add_flavor",
    "add_output",
    "add_overrides",
    "add_raw",
    "backend_flags",
    "backend_of",
    "backend_options",
    "errors_at_source",
    "load_job_file",
    "load_job_source",
    "load_job_sources",
    "non_negative",
    "open_backend_for",
    "relaxation_lines",
    "template_relaxations",
]
