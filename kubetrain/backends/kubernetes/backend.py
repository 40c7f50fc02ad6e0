"""The Kubernetes backend: `kubetrain.backends.base.Backend` on a cluster.

``KubernetesBackend`` is the facade: it renders a TrainJob (:mod:`.render`, for a flavor of
:mod:`.flavors`), creates it (:mod:`.submit`), follows it by watch (:mod:`.follow`), finds jobs by name
(:mod:`.lookup`), maps what it sees to the shared status model (:mod:`.status_map`), explains Pending
replicas (:mod:`.diagnose`, :mod:`.describe`) and merges the replicas' logs (:mod:`.logs`). A job is named
by its ``metadata.name`` (the ``kubetrain.dev/job`` label of its objects) within a namespace.

What only creating and following a job use (:mod:`.submit`, :mod:`.ssh_keys`, :mod:`.as_written`,
:mod:`.follow`) and the web view's change feed (:mod:`.changes`) are imported by the methods that need them:
``kubetrain status``, ``describe`` and ``list`` import none of them (every module is start-up time of a short
command).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...contract.errors import JobNotFound, UsageError
from ...contract.labels import JOB_LABEL
from ...contract.logs import GrepPattern, LogRecord, LogSink, LogStream
from ...contract.naming import label_value
from ...contract.pause import pause_point
from ...status import JobPhase, JobStatus
from ..base import DryRun, EventSink, JobProcesses, RunEvents, RunEventSink, RunResult
from .capabilities import check_queue
from .client.errors import ApiError, KubernetesError
from .client.resources import PODS
from .client.retry import RetryPolicy
from .cluster import Cluster
from .describe import Description
from .flavors import AUTO_ORDER, FlavorUnavailable, get_flavor
from .liveness import no_sign_of_life
from .logs import STREAMS_MERGED, LogTarget, Since, read_logs, targets_of
from .lookup import Located, job_pods, list_jobs
from .options import KubernetesOptions
from .status_map import group_pods, job_status, meta, roles_of

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from ...metrics.sample import MetricSample
    from ..logfiles.kept import KeptJob
    from .changes import ClusterChanges
    from .render import Rendered
    from .submit import DryRunReport, Submission

_NAME_RETRIES = 5


class KubernetesBackend(Cluster):
    """A cluster, reached through a kubeconfig (``context``) or the in-cluster service account, opened with
    :class:`.options.KubernetesOptions` (what each option does is said at its field): the options given
    whole (``KubernetesBackend(options=KubernetesOptions(namespace="ml"))``), their fields as keywords
    (``KubernetesBackend(namespace="ml")``), or both (the keywords win). For tests and tools, beside the
    options: ``api_client`` (a configured client instead of a kubeconfig) and ``retry``.
    """

    name = "kubernetes"
    metrics_in_output = True  # `@kubetrain:metrics ` lines of the container logs: the run's output carries them

    def __init__(self, *, options: KubernetesOptions | None = None, api_client: Any = None,
                 retry: RetryPolicy | None = None, **fields: Any) -> None:
        options = dataclasses.replace(options or KubernetesOptions(), **fields)  # a field it lacks: TypeError
        if options.flavor is not None:  # an unknown flavor is refused before connecting; an alias named as is
            options = dataclasses.replace(options, flavor=get_flavor(options.flavor).name)
        super().__init__(options, api_client=api_client, retry=retry)
        self._feeds: list[ClusterChanges] = []

    @property
    def flavor(self) -> str | None:
        """The flavor jobs are rendered for (None: chosen per job, the first whose controller is alive)."""
        return self.options.flavor

    def __enter__(self) -> KubernetesBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- capabilities and rendering --------------------------------------------------------------------

    def render(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None,
               name: str | None = None, *, check: bool = True) -> Rendered:
        """Render for this cluster: the flavor given (else the backend's), checked to be served (with a warning
        when its controller shows no sign of life), or the first whose controller is alive (job at last).
        ``check=False``: nothing checked; no request beyond discovery and, when no flavor is named, the
        liveness reads."""
        from ...jobspec import SpecError
        from .render import render_manifests

        if job.unconverted is not None:  # a stand-in for a document that can only go as written
            raise job.unconverted
        ns = namespace or job.metadata.namespace or self.namespace
        named = flavor or self.flavor
        notes: list[str] = []
        if named is not None:
            chosen = get_flavor(named)
            if check:
                problem = chosen.missing(self.capabilities())
                if problem:
                    raise FlavorUnavailable(problem)
                seen = self.liveness(chosen, ns)
                if not seen.live:
                    notes.append(no_sign_of_life(chosen, seen))
            rendered = render_manifests(job, chosen, ns, name=name)
        else:
            chosen = None
            caps = self.capabilities()
            served = [f for f in AUTO_ORDER if caps.missing(f) is None]
            # Served is not enough: a flavor whose controller shows no sign of life would leave the job Pending.
            # (Also for a client dry run: it shows what would be submitted; the liveness reads create nothing.)
            candidates = [f for f in served if self.liveness(get_flavor(f), ns).live]
            for skipped in (f for f in served if f not in candidates):
                seen = self.liveness(get_flavor(skipped), ns)
                why = "its controller is not running" if seen.state == "dead" else "its controller was not seen"
                notes.append(f"not the {skipped} flavor: this cluster serves its API, but {seen.evidence} ({why}); "
                             f"--flavor {skipped} asks for it all the same")
            first_error: SpecError | None = None
            for candidate in candidates:
                try:
                    rendered = render_manifests(job, candidate, ns, name=name)
                    chosen = get_flavor(candidate)
                    break
                except SpecError as exc:
                    first_error = first_error or exc
            else:
                assert first_error is not None
                raise first_error
        rendered.warnings[:0] = notes
        if check:
            assert chosen is not None and chosen.name == rendered.flavor
            chosen.check_served(self.kube, rendered.root)
            check_queue(self.kube, self.capabilities(), rendered.root, self.namespace)
        return rendered

    # -- creating ---------------------------------------------------------------------------------------

    def submit(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None, *,
               on_warning: Callable[[str], None] | None = None) -> Submission:
        """Create the job (root first, the rest owned by it). A taken name is an error, except for a
        ``namePrefix`` job, which gets another generated name as ``generateName`` would. ``on_warning`` hears
        the render's warnings before anything is created."""
        from .ssh_keys import fill_ssh_secrets
        from .submit import NameTaken, submit

        paused = job.spec.run_mode == "Pause" or job.spec.run_policy.suspend
        for attempt in range(_NAME_RETRIES):
            rendered = self.render(job, flavor, namespace)
            if attempt == 0 and on_warning is not None:
                for warning in rendered.warnings:
                    on_warning(warning)
            ns = meta(rendered.root).get("namespace") or self._ns(namespace)
            # An MPI job's ssh keys: made now, sent to the API server only (the render has none).
            objects = fill_ssh_secrets(rendered.objects)
            try:
                return submit(self.kube, objects, ns, flavor=rendered.flavor, name=rendered.name,
                              paused=paused, warnings=rendered.warnings)
            except NameTaken:
                if job.metadata.name or not job.metadata.name_prefix:
                    raise
        raise KubernetesError(f"no free name for prefix {job.metadata.name_prefix!r} after {_NAME_RETRIES} tries")

    def dry_run(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None, *,
                on_warning: Callable[[str], None] | None = None) -> DryRunReport:
        """``--dry-run=server``: every object sent with dryRun=All; the server's verdict on each."""
        from .ssh_keys import fill_ssh_secrets
        from .submit import dry_run

        rendered = self.render(job, flavor, namespace)
        for warning in rendered.warnings:
            if on_warning is not None:
                on_warning(warning)
        ns = meta(rendered.root).get("namespace") or self._ns(namespace)
        # Keys the server may check (a kubernetes.io/ssh-auth Secret must have one), stored nowhere.
        report = dry_run(self.kube, fill_ssh_secrets(rendered.objects), ns, flavor=rendered.flavor,
                         warnings=rendered.warnings)
        report.engines = self.engines(ns)
        return report

    def run(
        self,
        job: TrainJob,
        *,
        detach: bool = False,
        dry_run: DryRun | None = None,
        sink: LogSink | None = None,
        on_event: EventSink | None = None,
        on_status: RunEventSink | None = None,
    ) -> RunResult:
        """``kubetrain run --backend kubernetes``: create the job, then (unless ``detach``, or the job is
        created paused) follow it to its end, every replica's output into ``sink``, status changes and Pending
        causes to ``on_event``, and to ``on_status`` the status each time the follow's watch sees it change.
        Ctrl-C (KeyboardInterrupt) cancels the job, as locally. ``dry_run="server"``: the API server's verdict,
        nothing created; ``"client"``: the manifests (a v1 List), nothing sent. A job converted from a foreign
        document whose kind this cluster serves is that document, submitted as written (:mod:`.as_written`),
        unless ``convert`` or a flavor was asked for."""
        events = RunEvents(on_event, on_status)
        warn = events.warning

        namespace = self.options.namespace
        if job.source is not None and not self.options.convert and self.flavor is None:
            from . import as_written  # a foreign document only: `status` and the other verbs never import it

            written = as_written.plan(self, job, warn)
            if written is not None:
                return as_written.run(self, written, job, detach=detach, dry_run_mode=dry_run, sink=sink,
                                      events=events)
        if dry_run == "client":
            rendered = self.render(job, self.flavor, namespace, check=False)
            for warning in rendered.warnings:
                warn(warning)
            return RunResult(rendered.name, self.name, plan={"apiVersion": "v1", "kind": "List",
                                                             "items": rendered.objects},
                             warnings=list(rendered.warnings),
                             namespace=meta(rendered.root).get("namespace") or self._ns(namespace),
                             flavor=rendered.flavor)
        if dry_run == "server":
            report = self.dry_run(job, self.flavor, namespace, on_warning=warn)
            return RunResult(job.metadata.name or "", self.name, dry_run=report, warnings=list(report.warnings),
                             namespace=report.namespace, flavor=report.flavor)
        if dry_run is not None:
            raise UsageError(f"dry run {dry_run!r}: client or server")
        sub = self.submit(job, self.flavor, namespace, on_warning=warn)
        result = RunResult(sub.name, self.name, warnings=list(sub.warnings), detached=detach,
                           namespace=sub.namespace, flavor=sub.flavor)
        attached = not (detach or job.spec.run_mode == "Pause" or job.spec.run_policy.suspend)
        try:
            pause_point("kubernetes:submitted")  # a test hook (env_names.PAUSE_AT): created, not followed yet
            events.created(sub.name, f"created job {sub.name} ({sub.flavor} flavor) in namespace {sub.namespace}: "
                           + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in sub.objects))
            if not attached:
                result.status = self.status_in(sub.name, sub.namespace)
                return result
            from . import follow as following

            flavor = get_flavor(sub.flavor)  # the one the job was rendered for, handed down to the follow
            result.status = following.follow(self, sub.name, sub.namespace, sink=sink, on_event=events.say,
                                             timeout=self.options.timeout, cancel_on_interrupt=True,
                                             resource=flavor.resource_of(sub.root), flavor=flavor,
                                             on_status=events.status if events.wants_status else None)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM (the CLI's `Interrupted`) after the job was created and before the follow took
            # it over (which cancels on its own): an attached run leaves no job running behind it.
            if attached:
                with contextlib.suppress(Exception):
                    self.cancel_in(sub.name, sub.namespace)
            raise
        return result

    # -- status ---------------------------------------------------------------------------------------

    def status(self, job_id: str) -> JobStatus:
        """The job's status now: phase, replicas, counts, conditions, why replicas are Pending
        (``reason``/``message``) and the failed replica's last lines."""
        return self.status_in(job_id, None)

    def describe(self, job_id: str) -> Description:
        loc, pods = self._locate_with_pods(job_id, None)
        grouped = group_pods(pods, roles_of(loc.flavor, loc.workloads))  # once: 1,000 pods grouped once
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor,
                            grouped=grouped)
        diagnoses = self.diagnose_pending(status, loc.workloads, pods, flavor=loc.flavor, grouped=grouped)
        status = self.explain(status, loc.workloads, pods, diagnoses)
        # The root object as submitted: without what the API server keeps beside it (status, managedFields).
        spec = {k: v for k, v in loc.root.items() if k != "status"}
        spec["metadata"] = {k: v for k, v in meta(loc.root).items() if k != "managedFields"}
        return Description.of(status, diagnoses, loc.workloads, grouped, spec)

    def framework(self, job_id: str) -> str:
        """While a change feed runs, from its informers' objects (no request, "" for a job they do not hold
        yet); else from the job's workload objects."""
        feeds = [feed for feed in self._feeds if feed.running]
        if feeds:
            return feeds[0].framework(job_id)
        from .changes import framework_in_manifest

        loc = self._locate(job_id, None)
        return next((found for found in map(framework_in_manifest, loc.workloads) if found), "")

    def changes(self, on_change: Callable[[], None]) -> ClusterChanges:
        """Informers on kubetrain's workloads and pods of the namespace (:mod:`.changes`): any event is a change."""
        from .changes import ClusterChanges

        feed = ClusterChanges(self, on_change).start()
        self._feeds = [f for f in self._feeds if f.running] + [feed]
        return feed

    def processes(self, job_id: str) -> JobProcesses:
        raise UsageError(f"a replica of {job_id} is a pod of the cluster, not a process here: open a shell in it with "
                         f"kubectl exec -it -n {self.namespace} POD -- sh (kubetrain describe {job_id} names its pods)")

    # -- watching -------------------------------------------------------------------------------------

    def wait(self, name: str, namespace: str | None = None, *,
             until: Callable[[JobStatus], bool] | None = None, timeout: float | None = None) -> JobStatus:
        """Block until ``until(status)`` (default: the job has ended), by watch (:func:`.follow.wait`)."""
        from . import follow as following

        return following.wait(self, name, namespace, until=until, timeout=timeout)

    def follow(self, name: str, namespace: str | None = None, *, sink: LogSink | None = None,
               on_event: EventSink | None = None, timeout: float | None = None,
               cancel_on_interrupt: bool = False) -> JobStatus:
        """Follow a job to its end: output into ``sink``, kubetrain's messages to ``on_event``."""
        from . import follow as following

        return following.follow(self, name, namespace, sink=sink, on_event=on_event, timeout=timeout,
                                cancel_on_interrupt=cancel_on_interrupt)

    # -- logs -----------------------------------------------------------------------------------------

    def logs(
        self,
        job_id: str,
        *,
        role: str | None = None,
        index: int | None = None,
        follow: bool = False,
        tail: int | None = None,
        since: Since | None = None,
        until: Since | None = None,
        grep: str | GrepPattern | None = None,
        stream: LogStream | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
        stop: threading.Event | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> Iterator[LogRecord]:
        """Every selected replica's log, merged in time order, records keyed ``role-index`` (the prefix).

        ``follow``: until the job ends (or ``stop`` is set), across restarts; Pending replicas are waited
        for. ``previous``: the container instance before the last restart. ``until``: applied by kubetrain (the
        API has no such bound). ``stream``: refused, the API merging stdout and stderr (`STREAMS_MERGED`).
        ``on_missing(replica, why)`` hears about replicas without a log (not started; no previous instance). A
        follow streams at most ``max_log_requests`` replicas (:mod:`.log_choice`); ``on_note`` is told which,
        when some are left out."""
        if index is not None and role is None:
            raise KubernetesError("--index needs --role")
        if follow and previous:
            raise KubernetesError("--previous reads a finished container: it cannot be followed")
        if stream is not None:
            raise UsageError(f"--stream {stream}: {STREAMS_MERGED}")
        if follow and until is not None:
            raise UsageError("--until ends the output at a time and -f follows new output: give one of them")
        from ..logfiles import kept  # only `logs` reads them: no other verb pays for the import

        try:
            loc = self._locate(job_id, None)
        except JobNotFound:
            # The job is gone (cancelled, deleted): what this machine kept of its logs, if anything.
            found = kept.find(self.context, self.namespace, job_id)
            if found is None:
                raise
            return self._kept_logs(found, f"job {job_id} is no longer on the cluster", role, index, tail, since,
                                   until, grep, on_note)
        roles = roles_of(loc.flavor, loc.workloads)
        if role is not None:
            info = next((r for r in roles if r.role == role), None)
            if info is None:
                raise KubernetesError(f"job {job_id} has no role {role!r} (roles: {', '.join(r.role for r in roles)})")
            if index is not None and not 0 <= index < info.replicas:
                raise KubernetesError(f"role {role} of job {job_id} has replicas 0..{info.replicas - 1}")
        pods: list[Any] | None = None
        if follow:
            # A job that has ended has nothing left to follow: if its pods are gone too (a cleanPodPolicy, a TTL),
            # what was kept of it is all there is. Its pods are listed only then: a running job costs nothing more.
            ended = job_status(loc.workloads, [], job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor)
            if ended.phase.is_terminal:
                pods = job_pods(self.kube, loc.name, loc.namespace, loc.pods)
            if pods is None or pods:
                from . import follow as following

                # The metric lines left out are told the follower too: --tail counts only the lines shown.
                hidden = _metric_line if grep is None else None
                records = following.follow_logs(self, loc, role, index, tail, since, grep, stop, on_note, hidden)
                return _without_metrics(records, grep)
        if pods is None:
            pods = job_pods(self.kube, loc.name, loc.namespace, loc.pods)
        grouped = group_pods(pods, roles)
        targets = targets_of(grouped, {r.role: r.container for r in roles}, role, index)
        if not targets:
            # No pod left (deleted, or the job's TTL): the API has no log of it, this machine may.
            found = kept.find(self.context, loc.namespace, loc.name, str(meta(loc.root).get("uid") or ""))
            if found is not None:
                return self._kept_logs(found, f"job {loc.name} has no pods left", role, index, tail, since, until,
                                       grep, on_note)

        def missing(t: LogTarget, exc: ApiError) -> None:
            if on_missing is not None:
                on_missing(t.key, exc.message or exc.describe())

        # Metric lines are left out in the read itself, so that --tail counts only the lines shown.
        return read_logs(self.kube, loc.namespace, targets, tail=tail, since=since, until=until, grep=grep,
                         previous=previous, missing=missing, hidden=_metric_line if grep is None else None)

    def _kept_logs(self, found: KeptJob, why: str, role: str | None, index: int | None, tail: int | None,
                   since: Since | None, until: Since | None, grep: str | GrepPattern | None,
                   on_note: Callable[[str], None] | None) -> Iterator[LogRecord]:
        """The logs this machine kept of a job (`logfiles.kept`), filtered as the API's are, said once to
        `on_note` with where and when they were saved."""
        paths = found.paths(role, index)
        if role is not None and not paths:
            what = f"role {role}" + (f" index {index}" if index is not None else "")
            have = ", ".join(found.paths()) or "none"
            raise KubernetesError(f"{why}, and the logs kept of it on this machine have no {what} (kept: {have})")
        if on_note is not None:
            on_note(f"{why}: reading the logs this machine kept of it, {found.describe()}, "
                    f"{len(found.paths())} replica(s) ({found.path})")
        return _without_metrics(found.read(role=role, index=index, tail=tail, since=since, until=until, grep=grep),
                                grep)

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[MetricSample]:
        """See `Backend.metrics`: the metric lines of the replicas' container logs (`kubetrain.metrics.MARKER`
        at the start of a line), merged in time order; `follow` as for `logs`."""
        from ...metrics.sample import MARKER, parse_log_line

        records = self.logs(job_id, follow=follow, grep=re.compile("^" + re.escape(MARKER)))
        return (s for rec in records for s in parse_log_line(rec.text, rec.key) or ())

    # -- control --------------------------------------------------------------------------------------

    def cancel(self, job_id: str) -> JobStatus:
        """Stop the job: delete it, its pods with it (``Foreground``). Pods a flavor keeps once finished
        (kubeflow's ``cleanPodPolicy: None``) stay, for their logs (``delete`` removes them). Returns the last
        status, phase Cancelled."""
        return self.cancel_in(job_id, None)

    def delete(self, job_id: str) -> None:
        """Remove the job and everything it left (pods a flavor kept included)."""
        ns = self.namespace
        try:
            loc: Located | None = self._locate(job_id, ns)
        except JobNotFound:
            if not job_pods(self.kube, job_id, ns):
                raise
            loc = None
        if loc is not None:
            self.kube.delete(loc.resource, meta(loc.root)["name"], loc.namespace, propagation="Foreground")
        try:
            self.kube.delete_collection(PODS, ns, f"{JOB_LABEL}={label_value(job_id)}")
        except ApiError as exc:
            if exc.status not in (403, 404, 405):
                raise

    def suspend(self, job_id: str) -> JobStatus:
        """Stop the pods, keep the job (each flavor's way: ``spec.suspend`` on Jobs and JobSets,
        ``runPolicy.suspend`` on Kubeflow jobs, an ``AbortJob`` command on Volcano)."""
        return self._set_suspended(job_id, True)

    def resume(self, job_id: str) -> JobStatus:
        return self._set_suspended(job_id, False)

    def scale(self, job_id: str, replicas: int) -> JobStatus:
        """An elastic job's workers, changed while it runs, each flavor's way (`Flavor.scale`): an Indexed
        Job's completions and parallelism together (job), a Kubeflow job's Worker replicas; jobset and
        volcano refuse, saying why."""
        loc = self._locate(job_id, None)
        pods = job_pods(self.kube, loc.name, loc.namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor)
        if status.phase.is_terminal:
            raise KubernetesError(f"job {loc.name} has already ended ({status.phase.value}): there is nothing to scale")
        loc.flavor.scale(self.kube, loc, replicas)
        return self.status_in(loc.name, loc.namespace, explain=False)

    def _set_suspended(self, name: str, suspend: bool) -> JobStatus:
        loc = self._locate(name, None)
        pods = job_pods(self.kube, loc.name, loc.namespace, loc.pods)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace, flavor=loc.flavor)
        if status.phase.is_terminal:
            raise KubernetesError(f"job {loc.name} has already ended ({status.phase.value})")
        if suspend and status.phase is JobPhase.SUSPENDED:
            return status
        if not suspend and status.phase is not JobPhase.SUSPENDED:
            raise KubernetesError(f"job {loc.name} is {status.phase.value}, not Suspended")
        loc.flavor.suspend(self.kube, loc, suspend, self.capabilities())
        return self.status_in(loc.name, loc.namespace, explain=False)

    # Last in the class: a method named `list` shadows the builtin in the annotations that follow it.
    def list(self, *, limit: int | None = None) -> list[JobStatus]:
        """Every kubetrain job in the namespace (or all of them, ``all_namespaces``), newest first."""
        jobs = list_jobs(self.kube, self.capabilities(), None if self.options.all_namespaces else self.namespace,
                         untouched_after=self.options.untouched_after)
        return jobs if limit is None else jobs[:limit]


def _constructor_signature() -> inspect.Signature:
    """`KubernetesBackend(...)` as `inspect` and `help()` show it, every parameter a keyword: the options, each of
    their fields with the field's default (what `**fields` takes), then the tools' `api_client` and `retry`.
    Derived from `KubernetesOptions`, so that a new field is a keyword here with no line of its own."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature([
        inspect.Parameter("options", keyword, default=None, annotation="KubernetesOptions | None"),
        *(inspect.Parameter(f.name, keyword, default=f.default, annotation=f.type)
          for f in dataclasses.fields(KubernetesOptions)),
        inspect.Parameter("api_client", keyword, default=None, annotation="Any"),
        inspect.Parameter("retry", keyword, default=None, annotation="RetryPolicy | None"),
    ], return_annotation="None")


KubernetesBackend.__signature__ = _constructor_signature()  # type: ignore[attr-defined]

if TYPE_CHECKING:  # mypy holds the class to the protocol, signature for signature
    from ..base import Backend

    _IMPLEMENTS: type[Backend] = KubernetesBackend

__all__ = ["JobNotFound", "KubernetesBackend"]


def _metric_line(rec: LogRecord) -> bool:
    """A line `kubetrain.metrics.log` wrote in a replica's output (`kubetrain metrics` shows them)."""
    from ...metrics.wire import MARKER

    return rec.text.startswith(MARKER)


def _without_metrics(records: Iterator[LogRecord], grep: str | GrepPattern | None) -> Iterator[LogRecord]:
    """Replicas' output without its metric lines, unless asked for by a `grep` (which then decides alone)."""
    if grep is not None:
        return records
    return (r for r in records if not _metric_line(r))

