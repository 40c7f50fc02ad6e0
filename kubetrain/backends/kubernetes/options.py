"""What the Kubernetes backend is opened with (`KubernetesOptions`), and its verdicts on a job before it runs.

Light on purpose: the CLI imports this module to build its flags, so it imports no Kubernetes client, no
render and no pydantic; `verdicts` and `survey` import what they need when asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ...contract.choices import FLAVORS
from ..base import BackendOptions, Problem, Verdict, option
from .log_choice import DEFAULT_MAX_LOG_REQUESTS

if TYPE_CHECKING:
    from ...jobspec import TrainJob


def seconds(text: str) -> float:
    """A flag's number of seconds, 0 or more."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds from 0")
    return value


def positive(text: str) -> int:
    """A flag's whole number, 1 or more."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not 1 or more")
    return value


@dataclass(frozen=True)
class KubernetesOptions(BackendOptions):
    """The Kubernetes backend's options (`open_backend(KubernetesOptions(namespace="ml"))`). The backend and its
    `Cluster` keep them whole (`options`) and read each where it is used: an option is one field here, plus its
    use."""

    backend: ClassVar[str] = "kubernetes"
    title: ClassVar[str] = "Kubernetes"
    pod_templates: ClassVar[bool] = True
    logs_outlive_replicas: ClassVar[bool] = False  # a pod's log is deleted with the pod

    namespace: str | None = option(
        None, "Kubernetes namespace (default: the kubeconfig context's)", flags=["-n", "--namespace"], locates=True,
    )
    """Where jobs are created and looked for (None: the kubeconfig context's, else `default`); given, it wins
    over a job's `metadata.namespace`."""
    context: str | None = option(None, "kubeconfig context (Kubernetes)", flags=["--context"], locates=True)
    kubeconfig: str | os.PathLike[str] | None = option(  # noqa: RUF009 (a field, not a default)
        None, "kubeconfig file (Kubernetes; default: $KUBECONFIG, ~/.kube/config)", flags=["--kubeconfig"],
        locates=True,
    )
    flavor: str | None = option(
        None,
        "Kubernetes engine (default: jobset where its controller runs, else job). A foreign file "
        "(PyTorchJob, JobSet, Volcano Job, DeepSpeedJob, ...) whose kind the cluster serves is submitted as written, "
        "for its own controller, unless a flavor is named or --convert is given",
        flags=["--flavor"], verbs=["run"], choices=FLAVORS,
    )
    """The engine jobs are rendered for (None: the first of JobSet and job whose controller is alive)."""
    convert: bool = option(
        False,
        "Kubernetes: convert a foreign file into a TrainJob and render it for a flavor, even where the cluster "
        "runs its kind's controller (default there: the document as written, kubetrain's labels added)",
        flags=["--convert"], verbs=["run"],
    )
    all_namespaces: bool = option(
        False, "Kubernetes: jobs of every namespace", flags=["-A", "--all-namespaces"], verbs=["list"],
    )
    """`list` shows every namespace."""
    untouched_after: float = option(
        30.0,
        "Kubernetes: after this many seconds with no controller acting on a job, say so (NoController; default: 30)",
        flags=["--untouched-after"], verbs=["run", "status", "describe", "list", "ui"], parse=seconds,
        metavar="SECONDS",
    )
    liveness_ttl: float = option(
        60.0,
        "Kubernetes: seconds an engine's controller, once seen running or not, is believed so by the next commands "
        "(default: 60; 0: look each time)",
        flags=["--liveness-ttl"], verbs=["run", "validate"], parse=seconds, metavar="SECONDS",
    )
    max_log_requests: int = option(
        DEFAULT_MAX_LOG_REQUESTS,
        "Kubernetes: follow at most N replicas' logs at once (default: 5, as kubectl): rank 0 of each role first, "
        "among what --role/--index name; a replica left out that fails or restarts shows its last lines",
        flags=["--max-log-requests"], verbs=["run", "logs"], parse=positive, metavar="N",
    )
    """How many log streams an attached run or `logs -f` opens (one connection and thread each)."""
    timeout: float | None = option(None, "an attached run returns after that many seconds, with the status then")
    """For Python callers (no flag): a notebook that waits only so long."""
    in_cluster: bool | None = option(None, "use the pod's service account (None: when no kubeconfig is found)")
    """For tools (no flag): reach the API server as the pod this runs in."""
    watch_timeout: int = option(290, "seconds a watch request asks the API server to hold open before it is renewed")
    """For tests and tools (no flag)."""
    diagnose_every: float = option(10.0, "seconds between the reads that explain Pending replicas while following")
    """For tests and tools (no flag)."""
    log_grace: float = option(5.0, "seconds the log streams get to finish once a followed job has ended")
    """For tests and tools (no flag)."""

    @property
    def runs_as_written(self) -> bool:
        """A foreign document goes as written where the cluster runs its kind, unless a flavor or --convert
        asks for a TrainJob rendered by kubetrain."""
        return not self.convert and self.flavor is None

    def verdicts(self, job: TrainJob) -> list[Verdict]:
        """Render `job` for the flavor named, else for each flavor: every problem at once (one SpecError), or
        the objects and warnings. No cluster is asked."""
        from ...jobspec import SpecError, format_path
        from .render import render_manifests

        out = []
        for name in [self.flavor] if self.flavor is not None else FLAVORS:
            label = f"flavor {name}"
            try:
                rendered = render_manifests(job, name)
            except SpecError as exc:
                problems = [Problem(format_path(e.path), e.message, e.hint) for e in exc.errors]
                out.append(Verdict(name, problems, label=label, kind="flavor"))
                continue
            out.append(Verdict(name, [], list(rendered.warnings), rendered.objects, label=label, kind="flavor"))
        return out

    def survey(self) -> tuple[list[str], str | None]:
        """With a cluster to ask (a kubeconfig: --kubeconfig, --context, $KUBECONFIG or ~/.kube/config): what it
        can run, engine by engine, and which only have their CRDs. Validation needs no cluster: one not reached
        is a note."""
        from pathlib import Path

        home_config = (Path.home() / ".kube" / "config").is_file()
        if not (self.kubeconfig or self.context or os.environ.get("KUBECONFIG") or home_config):
            return [], None
        try:
            # Opened by name through the registry, as every caller opens a backend: the backend and its cluster
            # import this module, so it imports neither (no circle of files).
            from ..base import open_backend
            from .client.retry import RetryPolicy

            with open_backend(self, retry=RetryPolicy(attempts=1)) as cluster:
                lines = cluster.engines()  # type: ignore[attr-defined]  # the Kubernetes backend's, beyond the protocol
        except Exception as exc:  # validation stands without a cluster
            return [], f"no cluster asked what it can run ({type(exc).__name__}: {exc})"
        return ["what this cluster can run:", *(f"  {line}" for line in lines)], None


__all__ = ["KubernetesOptions", "seconds"]
