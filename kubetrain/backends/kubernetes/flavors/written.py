"""Foreign documents submitted as their authors wrote them, on a cluster that runs their controller.

`kubetrain run FILE --backend kubernetes` with a PyTorchJob, TFJob, MPIJob (v1 or v2beta1), XGBoostJob, PaddleJob,
JAXJob, JobSet, Volcano Job, T9k DeepSpeedJob or Run:ai TrainingWorkload whose kind the cluster serves submits
the document itself, with kubetrain's labels and an annotation added (``kubetrain.dev/job``,
``kubetrain.dev/submission``, ``kubetrain.dev/as-written``): the controller gives the containers what it always
does. Nothing is rendered, so nothing of kubetrain's is on the pods: each kind here says how its controller
labels them (``pod_selector``, the roles' ``pod_label``), how its status reads (its own conditions or phase,
mapped to the status model) and how it is suspended where it can be. One object per kind family, each a
:class:`~.base.Flavor` that only follows (it renders nothing and is never chosen as a flavor).

Per kind: where its pods are, the role of a pod, the job's phase, how it is suspended.

- training operator v1 kinds: pods labelled ``training.kubeflow.org/job-name``, role from ``replica-type``;
  conditions Succeeded / Failed / Suspended / Restarting; ``runPolicy.suspend``.
- MPIJob v2beta1 (mpi-operator): the same labels, role from ``training.kubeflow.org/job-role``; the same
  conditions; ``runPolicy.suspend``.
- JobSet: ``jobset.sigs.k8s.io/jobset-name``, role from ``replicatedjob-name``; conditions Completed / Failed /
  Suspended and ``replicatedJobsStatus``; ``spec.suspend``.
- Volcano Job: ``volcano.sh/job-name``, role from ``volcano.sh/task-spec``; ``status.state.phase``; a
  bus.volcano.sh Command (AbortJob / ResumeJob).
- DeepSpeedJob (T9k): the pods the job owns, one role (worker); ``status.phase``, ``backoffCount``;
  ``runMode.pause``.
- TrainingWorkload (Run:ai): the pods the job owns (or what it owns owns), one role; ``status.phase`` or its
  conditions; ``spec.active``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ....status import JobPhase
from ..client.resources import Resource
from ..workload import (
    EngineState,
    RoleInfo,
    api_group,
    cond_time,
    first_container,
    meta,
    parse_time,
    paused_patch,
    true_condition,
)
from . import jobset, kubeflow, volcano
from .base import Controller, Features, Flavor

if TYPE_CHECKING:
    from ..client.kube import Kube
    from ..served import Served
    from ..workload import FoundJob

KF = "training.kubeflow.org/"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
VOLCANO_JOB_NAME = "volcano.sh/job-name"
VOLCANO_TASK = "volcano.sh/task-spec"

_FOLLOW_ONLY = Features(every_framework=False)


def _all_indexes(count: int) -> set[int]:
    return set(range(count))


# --------------------------------------------------------------------------------------------- Kubeflow


KUBEFLOW_V1 = (
    *kubeflow.RESOURCES,
    Resource(kubeflow.GROUP, kubeflow.VERSION, "xgboostjobs", "XGBoostJob"),
    Resource(kubeflow.GROUP, kubeflow.VERSION, "paddlejobs", "PaddleJob"),
)


class KubeflowWritten(kubeflow.KubeflowFlavor):
    """The training operator v1's kinds as written. Its status: conditions (Created, Running, Restarting,
    Succeeded, Failed, Suspended: the kubeflow flavor's mapping) and ``replicaStatuses`` per replica type
    (active / succeeded / failed), which say which replicas ended once their pods are cleaned up. Its pods:
    ``training.kubeflow.org/job-name``, ``replica-type`` (the type in lower case), ``replica-index``."""

    role_label: str = KF + "replica-type"

    def owns(self, obj: Mapping[str, Any]) -> bool:
        return api_group(obj) == self.group and str(obj.get("apiVersion")).endswith("/" + self.version) and \
            obj.get("kind") in {r.kind for r in self.resources}

    def pod_selector(self, name: str, root: Mapping[str, Any] | None = None) -> str:
        return f"{KF}job-name={name}"

    def role_name(self, replica_type: str) -> str:
        return replica_type.lower()

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        spec = (workloads[0].get("spec") or {}) if workloads else {}
        for key, value in spec.items():
            if not key.endswith("ReplicaSpecs") or not isinstance(value, dict):
                continue
            for rtype, rspec in value.items():
                role = self.role_name(rtype)
                template = (rspec or {}).get("template") or {}
                out.append(RoleInfo(role, int((rspec or {}).get("replicas", 1)), container=first_container(template),
                                    pod_label=(self.role_label, role)))
        return out

    def finished_indexes(self, workloads: Sequence[Mapping[str, Any]]) -> tuple[
            dict[str, set[int]], dict[str, set[int]]]:
        """A replica type whose every replica succeeded (``replicaStatuses``): all its replicas, even once
        ``cleanPodPolicy`` has removed their pods."""
        statuses = ((workloads[0].get("status") or {}).get("replicaStatuses") or {}) if workloads else {}
        completed: dict[str, set[int]] = {}
        counts = {r.role: r.replicas for r in self.roles(workloads)}
        for rtype, rs in statuses.items():
            role = self.role_name(rtype)
            if role in counts and int((rs or {}).get("succeeded") or 0) >= counts[role]:
                completed[role] = _all_indexes(counts[role])
        return completed, {}


KUBEFLOW_WRITTEN = KubeflowWritten(
    name="PyTorchJob/TFJob/MPIJob/XGBoostJob/PaddleJob/JAXJob as written",
    summary="a training operator v1 job as its author wrote it",
    group=kubeflow.GROUP,
    version=kubeflow.VERSION,
    resources=KUBEFLOW_V1,
    install=kubeflow.FLAVOR.install,
    features=_FOLLOW_ONLY,
    replaced_pods_are_restarts=True,
    controller=kubeflow.CONTROLLER,
    as_written=True,
)


class MpiOperatorWritten(KubeflowWritten):
    """The MPI operator's v2beta1 MPIJob as written: a launcher Job (``<name>-launcher``) and worker pods
    (``<name>-worker-<i>``), all labelled ``training.kubeflow.org/job-name`` and ``job-role`` (launcher,
    worker); the workers also ``replica-index``. Its conditions are the training operator's."""

    role_label: str = KF + "job-role"


MPI_V2 = Resource(kubeflow.GROUP, "v2beta1", "mpijobs", "MPIJob")
MPI_OPERATOR = Controller("the MPI operator", ("mpi-operator",), ("mpi-operator",))
"""The mpi-operator's install (deploy/v2beta1/mpi-operator.yaml): the mpi-operator Deployment in mpi-operator."""

MPI_OPERATOR_WRITTEN = MpiOperatorWritten(
    name="MPIJob v2beta1 as written",
    summary="an MPI operator v2beta1 MPIJob as its author wrote it",
    group=kubeflow.GROUP,
    version="v2beta1",
    resources=(MPI_V2,),
    install="the MPI operator v2 (https://github.com/kubeflow/mpi-operator)",
    features=_FOLLOW_ONLY,
    replaced_pods_are_restarts=True,
    controller=MPI_OPERATOR,
    as_written=True,
)


# --------------------------------------------------------------------------------------------- JobSet


class JobSetWritten(jobset.JobSetFlavor):
    """A JobSet as written. Its status: conditions (Completed, Failed, Suspended: the jobset flavor's mapping),
    ``restarts``, and ``replicatedJobsStatus`` (per replicatedJob: Jobs ready / succeeded / failed / active),
    which says a replicatedJob finished once its pods are gone. Its pods: ``jobset.sigs.k8s.io/jobset-name``
    and ``replicatedjob-name``; a replica is ``job-index`` × completions + ``job-completion-index``."""

    def pod_selector(self, name: str, root: Mapping[str, Any] | None = None) -> str:
        return f"{JOBSET_NAME}={name}"

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        for rj in ((workloads[0].get("spec") or {}).get("replicatedJobs") or []) if workloads else []:
            jspec = (rj.get("template") or {}).get("spec") or {}
            completions = int(jspec.get("completions") or jspec.get("parallelism") or 1)
            name = str(rj.get("name", "job"))
            out.append(RoleInfo(name, int(rj.get("replicas", 1)) * completions, completions,
                                first_container(jspec.get("template") or {}), pod_label=(JOBSET_REPLICATED_JOB, name)))
        return out

    def finished_indexes(self, workloads: Sequence[Mapping[str, Any]]) -> tuple[
            dict[str, set[int]], dict[str, set[int]]]:
        roles = {r.role: r for r in self.roles(workloads)}
        rj_count = {str(rj.get("name")): int(rj.get("replicas", 1))
                    for rj in (workloads[0].get("spec") or {}).get("replicatedJobs") or []} if workloads else {}
        completed: dict[str, set[int]] = {}
        for rs in ((workloads[0].get("status") or {}).get("replicatedJobsStatus") or []) if workloads else []:
            name = str(rs.get("name"))
            if name in roles and int(rs.get("succeeded") or 0) >= rj_count.get(name, 1):
                completed[name] = _all_indexes(roles[name].replicas)
        return completed, {}


JOBSET_WRITTEN = JobSetWritten(
    name="JobSet as written",
    summary="a JobSet as its author wrote it",
    group=jobset.JOBSETS.group,
    version=jobset.JOBSETS.version,
    resources=(jobset.JOBSETS,),
    install=jobset.FLAVOR.install,
    features=_FOLLOW_ONLY,
    controller=jobset.CONTROLLER,
    as_written=True,
)


# --------------------------------------------------------------------------------------------- Volcano


class VolcanoWritten(volcano.VolcanoFlavor):
    """A Volcano Job as written. Its status: ``status.state.phase`` (Pending, Running, Restarting, Completing,
    Completed, Aborting, Aborted, Terminating, Terminated, Failed: the volcano flavor's mapping), ``retryCount``
    against ``maxRetry``, and the counts per state. Its pods: ``volcano.sh/job-name``, ``volcano.sh/task-spec``
    (the task), ``volcano.sh/task-index`` (or the ``<job>-<task>-<i>`` name)."""

    def pod_selector(self, name: str, root: Mapping[str, Any] | None = None) -> str:
        return f"{VOLCANO_JOB_NAME}={name}"

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        for task in ((workloads[0].get("spec") or {}).get("tasks") or []) if workloads else []:
            name = str(task.get("name", "task"))
            container = first_container(task.get("template") or {})
            out.append(RoleInfo(name, int(task.get("replicas", 1)), container=container,
                                pod_label=(VOLCANO_TASK, name)))
        return out


VOLCANO_WRITTEN = VolcanoWritten(
    name="Volcano Job as written",
    summary="a Volcano Job as its author wrote it",
    group=volcano.VOLCANO_JOBS.group,
    version=volcano.VOLCANO_JOBS.version,
    resources=(volcano.VOLCANO_JOBS,),
    install=volcano.FLAVOR.install,
    features=_FOLLOW_ONLY,
    controller=volcano.CONTROLLER,
    as_written=True,
)


# --------------------------------------------------------------------------------------------- by ownership


class OwnedPodsWritten(Flavor):
    """Kinds whose controller's pod labels kubetrain cannot name: their pods are the ones the job owns
    (directly, or through one object it owns). One role: the kind has one kind of replica."""

    role: str = "worker"

    def pods_owned(self) -> bool:
        return True

    def pod_selector(self, name: str, root: Mapping[str, Any] | None = None) -> str:
        return ""

    def replicas(self, root: Mapping[str, Any]) -> int:
        raise NotImplementedError

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        return [RoleInfo(self.role, self.replicas(workloads[0]))] if workloads else []


# T9k publishes the DeepSpeedJob's phase as a string without its values; these are the ones its user manuals
# show for its jobs (kubectl get: PHASE), mapped to the status model.
_T9K_PHASES = {
    "Succeeded": JobPhase.SUCCEEDED,
    "Complete": JobPhase.SUCCEEDED,
    "Completed": JobPhase.SUCCEEDED,
    "Failed": JobPhase.FAILED,
    "Paused": JobPhase.SUSPENDED,
    "Pausing": JobPhase.SUSPENDED,
    "Pending": JobPhase.PENDING,
    "Created": JobPhase.PENDING,
}


class DeepSpeedJobWritten(OwnedPodsWritten):
    """T9k's DeepSpeedJob as written (``batch.tensorstack.dev/v1beta1``). Its status (the API reference's
    DeepSpeedJobStatus): ``phase``, ``conditions``, ``tasks``, ``aggregate`` (replicas per state),
    ``backoffCount`` (restarts done) against ``runPolicy.backoffLimit``. Paused through ``runMode.pause``."""

    def replicas(self, root: Mapping[str, Any]) -> int:
        spec = root.get("spec") or {}
        elastic = spec.get("elastic") or {}
        if elastic.get("enabled") and elastic.get("expectedReplicas"):
            return int(elastic["expectedReplicas"])  # what T9k starts with
        return int((spec.get("worker") or {}).get("replicas", 1))

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        root = workloads[0]
        spec, status = root.get("spec") or {}, root.get("status") or {}
        limit = (spec.get("runPolicy") or {}).get("backoffLimit")
        backoff = int(status.get("backoffCount") or 0)
        name = str(status.get("phase") or "")
        phase = _T9K_PHASES.get(name, JobPhase.RUNNING if name else JobPhase.PENDING)
        if phase is JobPhase.PENDING and (((spec.get("runMode") or {}).get("pause") or {}).get("enable")):
            phase = JobPhase.SUSPENDED
        failed = true_condition(root, "Failed")
        done = true_condition(root, "Complete", "Succeeded", "Completed")
        cond = failed if phase is JobPhase.FAILED else done if phase is JobPhase.SUCCEEDED else None
        finished = cond_time(cond) if cond else None
        reason = (cond or {}).get("reason") if phase is JobPhase.FAILED else ("Suspended" if phase is
                                                                               JobPhase.SUSPENDED else None)
        message = (cond or {}).get("message") if phase is JobPhase.FAILED else None
        action = f"restarted {backoff}/{limit}, gave up" if phase is JobPhase.FAILED and limit is not None else None
        return EngineState(phase, reason, message, finished, backoff, limit, action)

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        pause = {"enable": True} if suspend else None
        kube.merge_patch(job.resource, meta(job.root)["name"], job.namespace,
                         {**paused_patch(suspend), "spec": {"runMode": {"pause": pause}}})


DEEPSPEEDJOBS = Resource("batch.tensorstack.dev", "v1beta1", "deepspeedjobs", "DeepSpeedJob")

DEEPSPEEDJOB_WRITTEN = DeepSpeedJobWritten(
    name="DeepSpeedJob as written",
    summary="a T9k DeepSpeedJob as its author wrote it",
    group=DEEPSPEEDJOBS.group,
    version=DEEPSPEEDJOBS.version,
    resources=(DEEPSPEEDJOBS,),
    install="T9k's job controller (https://t9k.github.io)",
    features=_FOLLOW_ONLY,
    controller=Controller("T9k's job controller"),
    as_written=True,
)


_RUNAI_PHASES = {
    "Succeeded": JobPhase.SUCCEEDED,
    "Completed": JobPhase.SUCCEEDED,
    "Failed": JobPhase.FAILED,
    "Stopped": JobPhase.SUSPENDED,
    "Suspended": JobPhase.SUSPENDED,
    "Pending": JobPhase.PENDING,
    "Creating": JobPhase.PENDING,
}


class TrainingWorkloadWritten(OwnedPodsWritten):
    """Run:ai's TrainingWorkload as written (``run.ai/v2alpha1``). Run:ai publishes no status reference: the
    phase is ``status.phase`` where Run:ai writes one (Pending, Running, Completed, Failed, Stopped ...), else a
    true condition of those names; ``spec.active.value: false`` is suspended (what ``runai suspend`` sets).
    Replicas: ``parallelism`` (one pod each), else one."""

    def replicas(self, root: Mapping[str, Any]) -> int:
        value = ((root.get("spec") or {}).get("parallelism") or {}).get("value")
        return int(value) if isinstance(value, int) and value > 0 else 1

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        root = workloads[0]
        spec, status = root.get("spec") or {}, root.get("status") or {}
        limit = (spec.get("backoffLimit") or {}).get("value")
        name = str(status.get("phase") or "")
        if not name:
            cond = true_condition(root, *_RUNAI_PHASES)
            name = str((cond or {}).get("type") or "")
        phase = _RUNAI_PHASES.get(name, JobPhase.RUNNING if name else JobPhase.PENDING)
        if not phase.is_terminal and (spec.get("active") or {}).get("value") is False:
            return EngineState(JobPhase.SUSPENDED, "Suspended", "suspended: kubetrain resume to start it",
                               backoff_limit=limit)
        cond = true_condition(root, name) if name else None
        finished = (cond_time(cond) if cond else parse_time(status.get("completionTime"))) if phase.is_terminal \
            else None
        failed = phase is JobPhase.FAILED
        return EngineState(phase, (cond or {}).get("reason") if failed else None,
                           (cond or {}).get("message") if failed else None, finished, 0, limit)

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        kube.merge_patch(job.resource, meta(job.root)["name"], job.namespace,
                         {**paused_patch(suspend), "spec": {"active": {"value": not suspend}}})


TRAININGWORKLOADS = Resource("run.ai", "v2alpha1", "trainingworkloads", "TrainingWorkload")

TRAININGWORKLOAD_WRITTEN = TrainingWorkloadWritten(
    name="TrainingWorkload as written",
    summary="a Run:ai TrainingWorkload as its author wrote it",
    group=TRAININGWORKLOADS.group,
    version=TRAININGWORKLOADS.version,
    resources=(TRAININGWORKLOADS,),
    install="Run:ai (https://docs.run.ai)",
    features=_FOLLOW_ONLY,
    controller=Controller("Run:ai's workload controller", ("runai",)),
    as_written=True,
)


WRITTEN: tuple[Flavor, ...] = (KUBEFLOW_WRITTEN, MPI_OPERATOR_WRITTEN, JOBSET_WRITTEN, VOLCANO_WRITTEN,
                               DEEPSPEEDJOB_WRITTEN, TRAININGWORKLOAD_WRITTEN)
"""Every kind kubetrain submits as written and follows."""


def written_kind(api_version: str, kind: str) -> tuple[Flavor, Resource] | None:
    """The follower of a document of ``kind`` at ``api_version``, and its resource; None for other kinds."""
    for follower in WRITTEN:
        for res in follower.resources:
            if res.api_version == api_version and res.kind == kind:
                return follower, res
    return None


def written_of(obj: Mapping[str, Any]) -> Flavor | None:
    found = written_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
    return found[0] if found else None


__all__ = [
    "DEEPSPEEDJOB_WRITTEN",
    "JOBSET_WRITTEN",
    "KUBEFLOW_WRITTEN",
    "MPI_OPERATOR_WRITTEN",
    "TRAININGWORKLOAD_WRITTEN",
    "VOLCANO_WRITTEN",
    "WRITTEN",
    "written_kind",
    "written_of",
]
