"""The Kubernetes backend: the local backend's verbs, on a cluster.

``KubernetesBackend`` renders a TrainJob (:mod:`.render`), creates it (:mod:`.submit`), follows it by
watch (:mod:`.watch`), maps what it sees to the shared status model (:mod:`.status_map`), explains
Pending replicas (:mod:`.diagnose`) and merges the replicas' logs (:mod:`.logs`). A job is named by its
``metadata.name`` (the ``kubetrain.dev/job`` label of its objects) within a namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...contract.labels import JOB_LABEL, MANAGED_BY, MANAGER, PAUSED_ANNOTATION
from ...contract.logs import LogRecord
from ...contract.naming import label_value
from ...status import Condition, ConditionStatus, JobPhase, JobStatus, ReplicaPhase
from ...terminal import OutputSink
from .capabilities import AUTO_ORDER, Capabilities, FlavorUnavailable, check_kind, detect
from .client import (
    JOBS,
    JOBSETS,
    JSON,
    KUBEFLOW_KINDS,
    PODS,
    VOLCANO_JOBS,
    ApiError,
    Kube,
    KubernetesError,
    Resource,
    RetryPolicy,
    connect,
)
from .diagnose import Diagnosis, diagnose
from .logs import LogFollower, LogTarget, Since, read_logs, targets_of
from .status_map import (
    KUEUE_QUEUE_LABEL,
    PodIndex,
    flavor_of,
    group_pods,
    is_root,
    job_status,
    jobs_by_name,
    labels,
    meta,
    roles_of,
)
from .submit import (
    DryRunReport,
    NameTaken,
    Submission,
    dry_run,
    submit,
)
from .watch import JobWatch

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from .render import Rendered

#: Lines of a failed replica's output shown with the failure.
FAILURE_TAIL = 10
_NAME_RETRIES = 5


class JobNotFound(KubernetesError):
    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f"no kubetrain job {name} in namespace {namespace} (kubetrain list --backend kubernetes "
                         f"-n {namespace})")


@dataclass
class RunResult:
    """What ``run`` did: created the job (and followed it), or only asked the server (dry run)."""

    name: str
    namespace: str
    flavor: str
    status: JobStatus | None = None
    dry_run: DryRunReport | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 succeeded (or detached, or a dry run accepted), 1 failed or refused, 130 cancelled."""
        if self.dry_run is not None:
            return 0 if self.dry_run.ok else 1
        if self.status is None:
            return 0
        if self.status.phase is JobPhase.FAILED:
            return 1
        if self.status.phase is JobPhase.CANCELLED:
            return 130
        return 0


@dataclass
class Description:
    """``describe``: the status, why replicas are Pending, the objects and pods behind the job."""

    status: JobStatus
    diagnoses: list[Diagnosis]
    objects: list[dict[str, str]]
    pods: dict[str, dict[str, str | None]]

    def status_lines(self) -> list[str]:
        """What ``kubetrain status`` prints: the summary, a line per replica, a line per Pending cause with
        its hint, and the failure with the failed replica's last lines."""
        s = self.status
        lines = [s.summary_line()]
        for r in s.replicas:
            detail = r.describe_exit() or (r.reason or "")
            lines.append(f"  {r.name:<16} {r.phase.value:<10} {detail}".rstrip())
        lines += [f"  {d.line()}" for d in self.diagnoses]
        if s.first_failure is not None and s.phase is JobPhase.FAILED:
            lines += s.first_failure.explain(s.job_id).splitlines()
        return lines

    def text(self) -> str:
        from ...status import format_describe

        lines = [format_describe(self.status)]
        if self.diagnoses:
            lines.append("Pending:")
            lines += [f"  {d.line()}" for d in self.diagnoses]
        lines.append("Objects:")
        lines += [f"  {o['kind']}/{o['name']} ({o['apiVersion']})" for o in self.objects] or ["  <none>"]
        lines.append("Pods:")
        if self.pods:
            width = max(len(k) for k in self.pods) + 2
            for replica, pod in self.pods.items():
                lines.append(f"  {replica.ljust(width)}{pod['name']}  node={pod.get('node') or '<none>'}")
        else:
            lines.append("  <none>")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = self.status.to_dict()
        data["diagnosis"] = [d.to_dict() for d in self.diagnoses]
        data["objects"] = list(self.objects)
        data["pods"] = dict(self.pods)
        return data


@dataclass
class _Located:
    """A job found on the cluster: its workload objects (root first) and their resource."""

    name: str
    namespace: str
    flavor: str
    resource: Resource
    workloads: list[JSON]

    @property
    def root(self) -> JSON:
        return self.workloads[0]


def _workload_resource(flavor: str, root: Mapping[str, Any]) -> Resource:
    if flavor == "job":
        return JOBS
    if flavor == "jobset":
        return JOBSETS
    if flavor == "volcano":
        return VOLCANO_JOBS
    if flavor == "kubeflow":
        kind = str(root.get("kind"))
        if kind in KUBEFLOW_KINDS:
            return KUBEFLOW_KINDS[kind]
        group, _, version = str(root.get("apiVersion")).rpartition("/")
        return Resource(group, version, kind.lower() + "s", kind)
    raise KubernetesError(f"unknown flavor {flavor!r}")


def _ordered(workloads: Sequence[JSON]) -> list[JSON]:
    return sorted(workloads, key=lambda o: (not is_root(o), meta(o).get("name", "")))


class KubernetesBackend:
    """A cluster, reached through a kubeconfig (``--context``) or the in-cluster service account.

    Every verb takes the job's name and an optional namespace (default: ``namespace`` given here, else
    the kubeconfig context's, else ``default``).
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        namespace: str | None = None,
        in_cluster: bool | None = None,
        api_client: Any = None,
        retry: RetryPolicy | None = None,
        watch_timeout: int = 290,
        diagnose_every: float = 10.0,
        log_grace: float = 5.0,
    ) -> None:
        context_namespace: str | None = None
        if api_client is None:
            conn = connect(kubeconfig, context, in_cluster=in_cluster)
            api_client, context_namespace = conn.api_client, conn.namespace
        self.kube = Kube(api_client, retry)
        self.namespace = namespace or context_namespace or "default"
        self.watch_timeout = watch_timeout
        self.diagnose_every = diagnose_every
        self.log_grace = log_grace
        self._caps: Capabilities | None = None

    def close(self) -> None:
        self.kube.close()

    def __enter__(self) -> KubernetesBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # -- capabilities and rendering --------------------------------------------------------------------

    def capabilities(self, refresh: bool = False) -> Capabilities:
        if self._caps is None or refresh:
            self._caps = detect(self.kube)
        return self._caps

    def render(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None,
               name: str | None = None) -> Rendered:
        """Render for this cluster: the flavor given (checked to be served) or the best one served."""
        from ...jobspec import SpecError
        from .render import render_manifests

        caps = self.capabilities()
        ns = namespace or job.metadata.namespace or self.namespace
        if flavor is not None:
            if flavor == "k8s":
                raise KubernetesError("k8s is the backend's alias, not a flavor: job, jobset, volcano or kubeflow")
            problem = caps.missing(flavor) if flavor in ("job", "jobset", "volcano", "kubeflow") else None
            if problem:
                raise FlavorUnavailable(problem)
            rendered = render_manifests(job, flavor, ns, name=name)
        else:
            candidates = [f for f in AUTO_ORDER if caps.missing(f) is None]
            first_error: SpecError | None = None
            for candidate in candidates:
                try:
                    rendered = render_manifests(job, candidate, ns, name=name)
                    break
                except SpecError as exc:
                    first_error = first_error or exc
            else:
                assert first_error is not None
                raise first_error
        self._check_cluster(job, rendered)
        return rendered

    def _check_cluster(self, job: TrainJob, rendered: Rendered) -> None:
        caps = self.capabilities()
        root = rendered.root
        if rendered.flavor == "kubeflow":
            check_kind(self.kube, "kubeflow", root["apiVersion"], root["kind"])
        queue = labels(root).get(KUEUE_QUEUE_LABEL)
        if queue and not caps.kueue:
            raise FlavorUnavailable(
                f"scheduling.queue {queue!r} is a Kueue LocalQueue, but this cluster does not serve Kueue "
                "(kueue.x-k8s.io): install Kueue or remove scheduling.queue")
        if queue and caps.kueue_version:
            lq = Resource("kueue.x-k8s.io", caps.kueue_version, "localqueues", "LocalQueue")
            ns = meta(root).get("namespace") or self.namespace
            try:
                found = self.kube.find(lq, queue, ns)
            except ApiError:
                found = {}  # not allowed to read queues: let Kueue tell
            if found is None:
                raise FlavorUnavailable(f"scheduling.queue: LocalQueue {queue} does not exist in namespace {ns}; "
                                        "the job would wait forever (kubectl get localqueues -n " + ns + ")")

    # -- submit -----------------------------------------------------------------------------------------

    def submit(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None) -> Submission:
        """Create the job (root first, the rest owned by it). A taken name is an error, except for a
        ``namePrefix`` job, which gets another generated name as ``generateName`` would."""
        paused = job.spec.run_mode == "Pause" or job.spec.run_policy.suspend
        for _attempt in range(_NAME_RETRIES):
            rendered = self.render(job, flavor, namespace)
            ns = meta(rendered.root).get("namespace") or self._ns(namespace)
            try:
                return submit(self.kube, rendered.objects, ns, flavor=rendered.flavor, name=rendered.name,
                              paused=paused, warnings=rendered.warnings)
            except NameTaken:
                if job.metadata.name or not job.metadata.name_prefix:
                    raise
        raise KubernetesError(f"no free name for prefix {job.metadata.name_prefix!r} after {_NAME_RETRIES} tries")

    def dry_run(self, job: TrainJob, flavor: str | None = None, namespace: str | None = None) -> DryRunReport:
        """``--dry-run=server``: every object sent with dryRun=All; the server's verdict on each."""
        rendered = self.render(job, flavor, namespace)
        ns = meta(rendered.root).get("namespace") or self._ns(namespace)
        return dry_run(self.kube, rendered.objects, ns, flavor=rendered.flavor, warnings=rendered.warnings)

    def run(
        self,
        job: TrainJob,
        *,
        flavor: str | None = None,
        namespace: str | None = None,
        dry_run_server: bool = False,
        detach: bool = False,
        sink: OutputSink | None = None,
        on_event: Callable[[str], None] | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """``kubetrain run --backend kubernetes``: submit, then (unless ``detach``) follow the job to its end,
        printing every replica's output through ``sink`` and status changes and Pending causes through
        ``on_event``. Ctrl-C (KeyboardInterrupt) cancels the job, as locally."""
        if dry_run_server:
            report = self.dry_run(job, flavor, namespace)
            return RunResult(job.metadata.name or "", report.namespace, report.flavor, dry_run=report,
                             warnings=list(report.warnings))
        sub = self.submit(job, flavor, namespace)
        result = RunResult(sub.name, sub.namespace, sub.flavor, warnings=list(sub.warnings))
        say = on_event or (lambda text: None)
        say(f"created {sub.flavor} job {sub.name} in namespace {sub.namespace}: "
            + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in sub.objects))
        if detach or job.spec.run_mode == "Pause" or job.spec.run_policy.suspend:
            result.status = self.status(sub.name, sub.namespace)
            return result
        result.status = self.follow(sub.name, sub.namespace, sink=sink, on_event=on_event, timeout=timeout,
                                    cancel_on_interrupt=True, resource=_workload_resource(sub.flavor, sub.root))
        return result

    # -- finding jobs ---------------------------------------------------------------------------------

    def _workload_kinds(self) -> list[Resource]:
        """The workload kinds this cluster serves, the likeliest first (a lookup lists them in turn)."""
        caps = self.capabilities()
        order: list[Resource] = []
        if caps.jobset:
            order.append(JOBSETS)
        order.append(JOBS)
        if caps.volcano:
            order.append(VOLCANO_JOBS)
        if caps.kubeflow:
            served = {r.get("kind") for r in self.kube.group_resources("kubeflow.org/v1")}
            order += [r for k, r in KUBEFLOW_KINDS.items() if k in served]
        return order

    def _locate(self, name: str, namespace: str | None) -> _Located:
        ns = self._ns(namespace)
        selector = f"{JOB_LABEL}={label_value(name)}"
        for res in self._workload_kinds():
            items, _ = self.kube.list(res, ns, label_selector=selector)
            groups = jobs_by_name(items)
            found = groups.get(label_value(name))
            if found:
                ordered = _ordered(found)
                return _Located(label_value(name), ns, flavor_of(ordered[0]), res, ordered)
        raise JobNotFound(name, ns)

    def _pods(self, name: str, namespace: str) -> list[JSON]:
        items, _ = self.kube.list(PODS, namespace, label_selector=f"{JOB_LABEL}={label_value(name)}")
        return items

    # -- status ---------------------------------------------------------------------------------------

    def status(self, name: str, namespace: str | None = None, *, explain: bool = True) -> JobStatus:
        """The job's status now: phase, replicas, counts, conditions; with ``explain``, why replicas are
        Pending (``reason``/``message``) and the failed replica's last lines."""
        loc = self._locate(name, namespace)
        pods = self._pods(loc.name, loc.namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace)
        if explain:
            status = self._explain(status, loc.workloads, pods)
        return status

    def _explain(self, status: JobStatus, workloads: Sequence[JSON], pods: Sequence[JSON],
                 diagnoses: Sequence[Diagnosis] | None = None) -> JobStatus:
        if diagnoses is None:
            diagnoses = self.diagnose_pending(status, workloads, pods)
        _pending_reason(status, diagnoses)
        if status.first_failure is not None and not status.first_failure.last_lines:
            status.first_failure.last_lines = self._last_lines(status, pods)
        return status

    def diagnose_pending(self, status: JobStatus, workloads: Sequence[JSON], pods: Sequence[JSON],
                         *, reads: bool = True) -> list[Diagnosis]:
        """Why replicas are Pending (``reads=False``: only what the pods show, no request)."""
        caps = self.capabilities() if reads else None
        return diagnose(self.kube if reads else None, status, workloads, pods,
                        kueue_version=caps.kueue_version if caps else None)

    def _last_lines(self, status: JobStatus, pods: Sequence[JSON]) -> list[str]:
        """The failed replica's last lines (one request): what it said before it died."""
        failure = status.first_failure
        if failure is None or not status.namespace:
            return []
        pod = group_pods(pods, []).current.get((failure.role, failure.index))
        if pod is None:
            return []
        try:
            records = list(read_logs(self.kube, status.namespace,
                                     [LogTarget(failure.replica, meta(pod)["name"], _main_container(pod))],
                                     tail=FAILURE_TAIL))
        except ApiError:
            return []
        return [r.text for r in records]

    @staticmethod
    def _explain_cheap(status: JobStatus, diagnoses: Sequence[Diagnosis]) -> JobStatus:
        _pending_reason(status, diagnoses)
        return status

    def describe(self, name: str, namespace: str | None = None) -> Description:
        loc = self._locate(name, namespace)
        pods = self._pods(loc.name, loc.namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace)
        diagnoses = self.diagnose_pending(status, loc.workloads, pods)
        status = self._explain(status, loc.workloads, pods, diagnoses)
        objects = [{"kind": str(o.get("kind")), "name": meta(o).get("name", ""), "apiVersion": str(o.get("apiVersion"))}
                   for o in loc.workloads]
        grouped = group_pods(pods, roles_of(loc.flavor, loc.workloads))
        pod_table = {f"{r}-{i}": {"name": meta(p).get("name"), "node": (p.get("spec") or {}).get("nodeName"),
                                  "phase": (p.get("status") or {}).get("phase")}
                     for (r, i), p in sorted(grouped.current.items())}
        return Description(status, diagnoses, objects, pod_table)

    # -- watching -------------------------------------------------------------------------------------

    def watch(self, name: str, namespace: str | None = None, *, resource: Resource | None = None) -> JobWatch:
        """A started :class:`JobWatch` on the job (stop it, or use it as a context manager). ``resource``: the
        job's workload kind when known (as after a submit), which saves looking the job up."""
        if resource is None:
            loc = self._locate(name, namespace)
            ns, label, resource = loc.namespace, loc.name, loc.resource
        else:
            ns, label = self._ns(namespace), label_value(name)
        return JobWatch(self.kube, ns, label, resource, timeout_seconds=self.watch_timeout).start()

    def _state(self, jw: JobWatch, name: str) -> Callable[[], tuple[JobStatus | None, PodIndex, dict[str, str | None]]]:
        def state() -> tuple[JobStatus | None, PodIndex, dict[str, str | None]]:
            workloads, pods, _deleted = jw.snapshot()
            if not workloads:
                return None, PodIndex({}, {}), {}
            ordered = _ordered(workloads)
            roles = roles_of(flavor_of(ordered[0]), ordered)
            status = job_status(ordered, pods, job_id=name, namespace=jw.namespace)
            return status, group_pods(pods, roles), {r.role: r.container for r in roles}

        return state

    def wait(self, name: str, namespace: str | None = None, *,
             until: Callable[[JobStatus], bool] | None = None, timeout: float | None = None) -> JobStatus:
        """Block until ``until(status)`` (default: the job has ended) — by watch: a job that ends between
        two looks is never missed. ``until`` sees Pending causes visible on the pods (``reason``); the status
        returned (also on timeout) is explained as by :meth:`status`."""
        until = until or (lambda s: s.phase.is_terminal)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.watch(name, namespace) as jw:
            seen = 0
            status: JobStatus | None = None
            state = self._state(jw, name)
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                seen = jw.wait_change(seen, timeout=left)
                if jw.error is not None:
                    raise _as_error(jw.error)
                timed_out = deadline is not None and time.monotonic() >= deadline
                if not jw.wait_synced(0):
                    if timed_out:
                        break
                    continue
                status = state()[0]
                if status is None:
                    return self._deleted_status(name, jw)
                workloads, pods, _ = jw.snapshot()
                status = self._explain_cheap(status, self.diagnose_pending(status, _ordered(workloads), pods,
                                                                           reads=False))
                if until(status) or timed_out:
                    if status.phase.is_terminal:
                        status = self._settle(jw, state, status)
                        workloads, pods, _ = jw.snapshot()
                    break
        if status is None:
            return self.status(name, namespace)
        return self._explain(status, _ordered(workloads), pods)

    def follow(
        self,
        name: str,
        namespace: str | None = None,
        *,
        sink: OutputSink | None = None,
        on_event: Callable[[str], None] | None = None,
        timeout: float | None = None,
        cancel_on_interrupt: bool = False,
        resource: Resource | None = None,
    ) -> JobStatus:
        """Follow a job to its end: every replica's output into ``sink``, status changes and Pending causes
        (one line per cause, with a hint) to ``on_event``. Returns the final status."""
        say = on_event or (lambda text: None)
        deadline = None if timeout is None else time.monotonic() + timeout
        jw = self.watch(name, namespace, resource=resource)
        state = self._state(jw, name)
        log_thread: threading.Thread | None = None
        follower: LogFollower | None = None
        if sink is not None:
            follower = LogFollower(self.kube, jw.namespace, jw, state, grace=self.log_grace)
            out = sink

            def pump() -> None:
                assert follower is not None
                for rec in follower:
                    out.record(rec)
                    out.flush()

            log_thread = threading.Thread(target=pump, name="kubetrain-logs", daemon=True)
            log_thread.start()
        status: JobStatus | None = None
        try:
            status = self._follow_loop(jw, state, name, say, deadline)
        except KeyboardInterrupt:
            if not cancel_on_interrupt:
                raise
            say(f"interrupted: cancelling job {name}")
            status = self.cancel(name, jw.namespace)
        finally:
            if log_thread is not None and follower is not None:
                log_thread.join(self.log_grace + 2.0)
                follower.stop()
            jw.stop()
        if status.phase is JobPhase.FAILED and status.first_failure is not None:
            _, pods, _ = jw.snapshot()
            status.first_failure.last_lines = self._last_lines(status, pods)
        return status

    def _follow_loop(self, jw: JobWatch, state: Callable[[], tuple[JobStatus | None, PodIndex, Any]], name: str,
                     say: Callable[[str], None], deadline: float | None) -> JobStatus:
        seen = 0
        last_phase: JobPhase | None = None
        replica_phases: dict[str, ReplicaPhase] = {}
        said: set[str] = set()
        # Causes that cost requests (events, Kueue, PodGroups) are looked up once replicas have been Pending for
        # a while, then every `diagnose_every` seconds; what the pods show is reported at once, for free.
        last_read = time.monotonic()
        status: JobStatus | None = None
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = self.diagnose_every if left is None else min(left, self.diagnose_every)
            seen = jw.wait_change(seen, timeout=wait)
            if jw.error is not None:
                raise _as_error(jw.error)
            if not jw.wait_synced(0):
                continue
            status = state()[0]
            if status is None:
                return self._deleted_status(name, jw)
            if status.phase.is_terminal:
                status = self._settle(jw, state, status)
            for r in status.replicas:
                before = replica_phases.get(r.name)
                if before is not r.phase and r.phase.is_terminal:
                    say(f"{r.name} {'succeeded' if r.phase is ReplicaPhase.SUCCEEDED else 'failed'}"
                        + (f": {r.describe_exit()}" if r.phase is ReplicaPhase.FAILED and r.describe_exit() else ""))
                elif before is not None and before is not r.phase and r.phase is ReplicaPhase.RUNNING and r.restarts:
                    say(f"{r.name} restarted ({r.restarts} restart{'s' if r.restarts != 1 else ''})")
                replica_phases[r.name] = r.phase
            if status.phase is not last_phase:
                say(f"job {name} {status.phase.value}" + (f" ({status.reason})" if status.reason else ""))
                last_phase = status.phase
            if status.phase.is_terminal:
                self._stop_hosting(jw)
                return status
            if any(r.phase is ReplicaPhase.PENDING for r in status.replicas):
                workloads, pods, _ = jw.snapshot()
                reads = time.monotonic() - last_read >= self.diagnose_every
                if reads:
                    last_read = time.monotonic()
                for d in self.diagnose_pending(status, _ordered(workloads), pods, reads=reads):
                    line = d.line()
                    if line not in said:
                        said.add(line)
                        say(f"pending: {line}")
            if deadline is not None and time.monotonic() >= deadline:
                return status

    def _settle(self, jw: JobWatch, state: Callable[[], tuple[JobStatus | None, PodIndex, Any]],
                status: JobStatus, quiet: float = 0.1, timeout: float = 2.0) -> JobStatus:
        """The workload and pod watches are separate streams: when the engine says the job has ended, give
        the pods' last changes a moment to arrive (until every replica has ended, or the pods have been
        quiet for ``quiet`` seconds: pods that host a launcher's processes never end by themselves)."""
        deadline = time.monotonic() + timeout
        seen = jw.version
        while any(not r.phase.is_terminal and r.reason not in ("NoPod", "NotStarted", "Suspended")
                  for r in status.replicas) and time.monotonic() < deadline:
            now = jw.wait_change(seen, timeout=min(quiet, max(0.0, deadline - time.monotonic())))
            if now == seen:
                break
            seen = now
            latest = state()[0]
            if latest is not None:
                status = latest
        return status

    def _stop_hosting(self, jw: JobWatch) -> None:
        """Job flavor: once the root Job has ended, the other roles' Jobs (hosting a launcher's processes,
        parameter servers) would run on: suspend them (their pods go, their record stays)."""
        workloads, _, _ = jw.snapshot()
        for job in _ordered(workloads)[1:]:
            if flavor_of(job) != "job" or (job.get("spec") or {}).get("suspend"):
                continue
            done = any(c.get("status") == "True" and c.get("type") in ("Complete", "Failed")
                       for c in (job.get("status") or {}).get("conditions") or [])
            if not done:
                with contextlib.suppress(ApiError):
                    self.kube.merge_patch(JOBS, meta(job)["name"], jw.namespace, {"spec": {"suspend": True}})

    def _deleted_status(self, name: str, jw: JobWatch) -> JobStatus:
        deleted = list(jw.workloads.deleted.values())
        _, pods, _ = jw.snapshot()
        if deleted:
            return job_status(_ordered(deleted), pods, job_id=name, namespace=jw.namespace, deleted=True)
        raise JobNotFound(name, jw.namespace)

    # -- logs -----------------------------------------------------------------------------------------

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        follow: bool = False,
        role: str | None = None,
        index: int | None = None,
        tail: int | None = None,
        since: Since | None = None,
        grep: str | re.Pattern[str] | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
    ) -> Iterator[LogRecord]:
        """Every selected replica's log, merged in time order, records keyed ``role-index`` (the prefix).

        ``follow``: until the job ends, across restarts; Pending replicas are waited for. ``previous``:
        the container instance before the last restart. ``on_missing(replica, why)`` hears about replicas
        without a log (not started; no previous instance)."""
        if index is not None and role is None:
            raise KubernetesError("--index needs --role")
        if follow and previous:
            raise KubernetesError("--previous reads a finished container: it cannot be followed")
        loc = self._locate(name, namespace)
        roles = roles_of(loc.flavor, loc.workloads)
        if role is not None:
            info = next((r for r in roles if r.role == role), None)
            if info is None:
                raise KubernetesError(f"job {name} has no role {role!r} (roles: {', '.join(r.role for r in roles)})")
            if index is not None and not 0 <= index < info.replicas:
                raise KubernetesError(f"role {role} of job {name} has replicas 0..{info.replicas - 1}")
        if follow:
            return self._follow_logs(loc, role, index, tail, since, grep)
        pods = self._pods(loc.name, loc.namespace)
        grouped = group_pods(pods, roles)
        targets = targets_of(grouped, {r.role: r.container for r in roles}, role, index)

        def missing(t: LogTarget, exc: ApiError) -> None:
            if on_missing is not None:
                on_missing(t.key, exc.message or exc.describe())

        return read_logs(self.kube, loc.namespace, targets, tail=tail, since=since, grep=grep, previous=previous,
                         missing=missing)

    def _follow_logs(self, loc: _Located, role: str | None, index: int | None, tail: int | None,
                     since: Since | None, grep: str | re.Pattern[str] | None) -> Iterator[LogRecord]:
        jw = JobWatch(self.kube, loc.namespace, loc.name, loc.resource, timeout_seconds=self.watch_timeout).start()
        try:
            jw.wait_synced(30)
            follower = LogFollower(self.kube, loc.namespace, jw, self._state(jw, loc.name), role=role, index=index,
                                   tail=tail, since=since, grep=grep, grace=self.log_grace)
            yield from follower
        finally:
            jw.stop()

    # -- control --------------------------------------------------------------------------------------

    def cancel(self, name: str, namespace: str | None = None) -> JobStatus:
        """Stop the job: delete it, its pods with it (``Foreground``). Under ``cleanPodPolicy: None``
        (kubeflow) pods that have finished are kept, for their logs (``kubetrain delete`` removes them).
        Returns the last status, phase Cancelled."""
        loc = self._locate(name, namespace)
        pods = self._pods(loc.name, loc.namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace)
        if status.phase.is_terminal:
            raise KubernetesError(f"job {loc.name} has already ended ({status.phase.value}); "
                                  f"kubetrain delete {loc.name} removes it")
        policy = ((loc.root.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy")
        if policy == "None":
            for pod in pods:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    self.kube.merge_patch(PODS, meta(pod)["name"], loc.namespace,
                                          {"metadata": {"ownerReferences": None}})
        self.kube.delete(loc.resource, meta(loc.root)["name"], loc.namespace, propagation="Foreground")
        now = time.time()
        status.phase = JobPhase.CANCELLED
        status.reason, status.message, status.finished_at = "Cancelled", "cancelled by request", now
        status.conditions.append(Condition("Cancelled", ConditionStatus.TRUE, "Cancelled", "cancelled by request", now))
        return status

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Remove the job and everything it left (pods kept by cleanPodPolicy None included)."""
        ns = self._ns(namespace)
        try:
            loc = self._locate(name, ns)
        except JobNotFound:
            leftovers = self._pods(name, ns)
            if not leftovers:
                raise
            loc = None
        if loc is not None:
            self.kube.delete(loc.resource, meta(loc.root)["name"], loc.namespace, propagation="Foreground")
        selector = f"{JOB_LABEL}={label_value(name)}"
        try:
            self.kube.delete_collection(PODS, ns, selector)
        except ApiError as exc:
            if exc.status not in (403, 404, 405):
                raise

    def suspend(self, name: str, namespace: str | None = None) -> JobStatus:
        """Stop the pods, keep the job (``spec.suspend`` on Jobs and JobSets, ``runPolicy.suspend`` on Kubeflow
        jobs, an ``AbortJob`` command on Volcano)."""
        return self._set_suspended(name, namespace, True)

    def resume(self, name: str, namespace: str | None = None) -> JobStatus:
        return self._set_suspended(name, namespace, False)

    def _set_suspended(self, name: str, namespace: str | None, suspend: bool) -> JobStatus:
        loc = self._locate(name, namespace)
        pods = self._pods(loc.name, loc.namespace)
        status = job_status(loc.workloads, pods, job_id=loc.name, namespace=loc.namespace)
        if status.phase.is_terminal:
            raise KubernetesError(f"job {loc.name} has already ended ({status.phase.value})")
        if suspend and status.phase is JobPhase.SUSPENDED:
            return status
        if not suspend and status.phase is not JobPhase.SUSPENDED:
            raise KubernetesError(f"job {loc.name} is {status.phase.value}, not Suspended")
        paused = {"metadata": {"annotations": {PAUSED_ANNOTATION: "true" if suspend else None}}}
        root_name = meta(loc.root)["name"]
        if loc.flavor == "job":
            for job in loc.workloads:
                patch: JSON = {"spec": {"suspend": suspend}}
                if job is loc.root:
                    patch.update(paused)
                self.kube.merge_patch(JOBS, meta(job)["name"], loc.namespace, patch)
        elif loc.flavor == "jobset":
            self.kube.merge_patch(JOBSETS, root_name, loc.namespace, {**paused, "spec": {"suspend": suspend}})
        elif loc.flavor == "kubeflow":
            self.kube.merge_patch(loc.resource, root_name, loc.namespace,
                                  {**paused, "spec": {"runPolicy": {"suspend": suspend}}})
        elif loc.flavor == "volcano":
            self._volcano_command(loc, "AbortJob" if suspend else "ResumeJob")
            self.kube.merge_patch(VOLCANO_JOBS, root_name, loc.namespace, paused)
        else:
            raise KubernetesError(f"job {loc.name}: cannot suspend a {loc.flavor} job")
        return self.status(loc.name, loc.namespace, explain=False)

    def _volcano_command(self, loc: _Located, action: str) -> None:
        """What ``vcctl job suspend/resume`` does: a bus.volcano.sh Command the Volcano controller executes."""
        if not self.capabilities().serves("bus.volcano.sh", "v1alpha1"):
            raise KubernetesError(
                f"job {loc.name} is a Volcano job: suspending and resuming it takes Volcano's Command API "
                "(bus.volcano.sh/v1alpha1), which this cluster does not serve; cancel it instead, or use vcctl")
        root = loc.root
        ref = {"apiVersion": root["apiVersion"], "kind": root["kind"], "name": meta(root)["name"],
               "uid": meta(root)["uid"]}
        body = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                "metadata": {"generateName": f"{meta(root)['name']}-{action.lower()}-", "namespace": loc.namespace,
                             "ownerReferences": [{**ref, "controller": True}]},
                "action": action, "target": ref}
        commands = Resource("bus.volcano.sh", "v1alpha1", "commands", "Command")
        self.kube.create(commands, body, loc.namespace)


    # Last in the class: a method named `list` shadows the builtin in the annotations that follow it.
    def list(self, namespace: str | None = None, *, all_namespaces: bool = False) -> list[JobStatus]:
        """Every kubetrain job in the namespace (or all of them): one list per served workload kind + one of pods."""
        ns = None if all_namespaces else self._ns(namespace)
        selector = f"{MANAGED_BY}={MANAGER}"
        workloads: list[JSON] = []
        for res in self._workload_kinds():
            items, _ = self.kube.list(res, ns, label_selector=selector)
            workloads += items
        pods, _ = self.kube.list(PODS, ns, label_selector=selector)
        pods_by: dict[tuple[str, str], list[JSON]] = {}
        for pod in pods:
            pods_by.setdefault((meta(pod).get("namespace", ""), labels(pod).get(JOB_LABEL, "")), []).append(pod)
        by_job: dict[tuple[str, str], list[JSON]] = {}
        for obj in workloads:
            for job, objs in jobs_by_name([obj]).items():
                by_job.setdefault((meta(obj).get("namespace", ""), job), []).extend(objs)
        out = []
        for (job_ns, job), objs in sorted(by_job.items()):
            ordered = _ordered(objs)
            job_pods = pods_by.get((job_ns, job), [])
            status = job_status(ordered, job_pods, job_id=job, namespace=job_ns)
            diagnoses = self.diagnose_pending(status, ordered, job_pods, reads=False)
            out.append(self._explain_cheap(status, diagnoses))
        out.sort(key=lambda s: (s.created_at or 0.0, s.job_id), reverse=True)
        return out


def _pending_reason(status: JobStatus, diagnoses: Sequence[Diagnosis]) -> None:
    """A live job held by Pending causes: the first cause is its reason, the causes' messages its message."""
    if not diagnoses or status.phase.is_terminal:
        return
    status.reason = diagnoses[0].cause
    if len(diagnoses) == 1:
        status.message = diagnoses[0].message
    else:
        status.message = "; ".join(f"{d.cause}: {d.message}" for d in diagnoses)


def _main_container(pod: Mapping[str, Any]) -> str | None:
    containers = (pod.get("spec") or {}).get("containers") or []
    return containers[0].get("name") if containers else None


def _as_error(exc: BaseException) -> KubernetesError:
    if isinstance(exc, KubernetesError):
        return exc
    return KubernetesError(f"watching the job failed: {type(exc).__name__}: {exc}")


__all__ = ["Description", "JobNotFound", "KubernetesBackend", "RunResult"]
