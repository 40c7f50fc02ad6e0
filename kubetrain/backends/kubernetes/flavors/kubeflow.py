"""Flavor `kubeflow`: the training operator's kubeflow.org/v1 kinds, one per framework.

The kind comes from the framework's record (`kubetrain.contract.frameworks.record_of(framework).kubeflow`):

| framework                        | kind       | replica types                | container / port name     |
|----------------------------------|------------|------------------------------|---------------------------|
| pytorch, deepspeed (no launcher) | PyTorchJob | Master, Worker               | pytorch / pytorchjob-port |
| tensorflow                       | TFJob      | Chief, Worker, PS, Evaluator | tensorflow / tfjob-port   |
| mpi                              | MPIJob     | Launcher, Worker             | mpi / -                   |
| jax                              | JAXJob     | Worker                       | jax / jaxjob-port         |

Replica `i` of type `r` is the pod (and per-replica Service) `<base>-<r>-<i>`. The operator sets its own
RANK / TF_CONFIG / MASTER_ADDR; kubetrain's start-up script exports the same contract as on every other
flavor over them (same values where both set one), so a program sees identical variables everywhere.
The replica index comes from the operator's `training.kubeflow.org/replica-index` pod label.

A cluster may serve some of the kinds and not others: which ones is one more discovery request, made
for this flavor only. `cleanPodPolicy: None` keeps finished pods (and their logs) past a cancel.

An MPI job with `mpi.mpiJobVersion: v2beta1` renders as the MPI Operator's MPIJob (kubeflow.org/v2beta1):
the operator makes the ssh key pair and mounts it at `sshAuthMountPath`, its workers' pods are
`<base>-worker-<i>` in the Service `<base>-worker`, and workers without a program of their own run the
image's `/usr/sbin/sshd -De`, as the operator would start them (manifests/mpi_ssh.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ....contract import env_names
from ....contract.features import FEATURES
from ....contract.frameworks import RECORDS, KubeflowKind, record_of
from ....status import JobPhase
from ..client.errors import KubernetesError
from ..client.resources import Resource
from ..workload import (
    EngineState,
    RoleInfo,
    api_group,
    cond_time,
    first_container,
    meta,
    paused_patch,
    suspended_phase,
    template_role,
    true_condition,
)
from .base import Controller, Flavor, FlavorUnavailable

if TYPE_CHECKING:
    from ....jobspec import JobSpec
    from ....jobspec.controller import Controller as SpecController
    from ..client.kube import Kube
    from ..manifests.context import Ctx, Layout, RoleView
    from ..served import Served
    from ..workload import FoundJob

GROUP, VERSION = "kubeflow.org", "v1"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_KINDS: Mapping[str, KubeflowKind] = {
    **{record.kubeflow.kind: record.kubeflow for record in RECORDS.values() if record.kubeflow is not None},
    "XGBoostJob": KubeflowKind("XGBoostJob", "xgbReplicaSpecs", "xgboost", "xgboostjob-port", "xgboostjobs"),
    "PaddleJob": KubeflowKind("PaddleJob", "paddleReplicaSpecs", "paddle", "master", "paddlejobs"),
}
"""The frameworks' kinds (from their records), then those only a converted job of that kind renders as (its
`spec.controller`: XGBoostJob, PaddleJob)."""
RESOURCES = tuple(Resource(GROUP, VERSION, kind.plural, kind.kind) for kind in CONTROLLER_KINDS.values())
MPI_OPERATOR_VERSION = "v2beta1"
MPIJOBS_V2 = Resource(GROUP, MPI_OPERATOR_VERSION, "mpijobs", "MPIJob")
"""The MPI Operator's MPIJob (`mpi.mpiJobVersion: v2beta1`)."""
"""A converted job's own kind (`spec.controller`, kubeflow.org/v1) → its replica specs, container, port names:
it renders back as that kind, whatever kubetrain framework stands for it."""
INDEX_ENV = env_names.REPLICA_INDEX
INDEX_FIELD = "metadata.labels['training.kubeflow.org/replica-index']"
OPERATOR_ENV = ("PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                "TF_CONFIG", "PET_*")
"""Variables the training operator appends to the container's env (after kubetrain's, so they would win)."""

_REPLICA_TYPES = {"ps": "PS"}


def replica_type(role: str) -> str:
    return _REPLICA_TYPES.get(role, role.capitalize())


CONTROLLER = Controller("the Kubeflow training operator", ("kubeflow",), ("training-operator",))
"""The training operator v1's install (manifests/overlays/standalone, Kubeflow's platform): the training-operator
Deployment in kubeflow."""


class KubeflowFlavor(Flavor):
    # -- the API ---------------------------------------------------------------------------------------

    def missing(self, caps: Served) -> str | None:
        """A cluster with the MPI Operator alone serves kubeflow.org/v2beta1 only: it runs MPI jobs rendered
        for it (which kind a job needs is `check_served`'s)."""
        if caps.serves(GROUP, MPI_OPERATOR_VERSION):
            return None
        return super().missing(caps)

    def served_resources(self, kube: Kube, caps: Served) -> list[Resource]:
        if self.missing(caps) is None and not caps.serves(GROUP, VERSION):
            return [MPIJOBS_V2]
        if self.missing(caps) is not None:
            return []
        served = {r.get("kind") for r in kube.group_resources(self.api_version)}
        out = [r for r in self.resources if r.kind in served]
        if caps.serves(GROUP, MPI_OPERATOR_VERSION):
            out.append(MPIJOBS_V2)
        return out

    def check_served(self, kube: Kube, root: Mapping[str, Any]) -> None:
        """The group serves several kinds: is the one this job renders as among them?"""
        api_version, kind = str(root["apiVersion"]), str(root["kind"])
        names = {r.get("kind") for r in kube.group_resources(api_version)}
        if kind not in names:
            served = ", ".join(sorted(n for n in names if n)) or "nothing"
            hint = f"install {self.install}"
            if kind == "MPIJob":
                hint += (" (MPIJob v1), or the MPI Operator (MPIJob v2beta1, https://github.com/kubeflow/mpi-operator)"
                         " and set mpi.mpiJobVersion to the version it serves")
            raise FlavorUnavailable(f"the {self.name} flavor renders this job as a {kind} ({api_version}), which "
                                    f"this cluster does not serve (it serves {served}): {hint}")

    def owns(self, obj: Mapping[str, Any]) -> bool:
        return api_group(obj) == self.group  # every kind of the group, the ones kubetrain renders and others

    def resource_of(self, root: Mapping[str, Any]) -> Resource:
        kind = str(root.get("kind"))
        for res in (*self.resources, MPIJOBS_V2):
            if res.kind == kind and res.api_version == root.get("apiVersion"):
                return res
        group, _, version = str(root.get("apiVersion")).rpartition("/")
        return Resource(group, version, kind.lower() + "s", kind)

    # -- render ----------------------------------------------------------------------------------------

    def layout(self, name: str, counts: dict[str, int], spec: JobSpec | None = None) -> Layout:
        from ..manifests.context import Layout, base_name, room_for_base

        controller = spec.controller if spec is not None else None
        # The operator names a Service after each replica: the job name must start with a letter.
        if _mpi_v2(spec):
            # The MPI Operator's pods: hostname `<job>-worker-<i>` in its headless Service `<job>-worker`.
            base = base_name(name, room_for_base(counts, 0), rfc1035=True)
            return Layout(base, f"{base}-{{role}}-{{index}}.{base}-worker", f"{base}-worker", INDEX_ENV)
        base = base_name(name, room_for_base(counts, 0), rfc1035=True)
        # A job of the operator's own kind keeps its replica types' names (`<job>-master-0` for a TFJob's Master).
        names = ({role: r.name.lower() for role, r in controller.roles.items() if r.name.lower() != role}
                 if controller is not None and self.runs_controller(controller) else {})
        return Layout(base, f"{base}-{{role}}-{{index}}", None, INDEX_ENV, names)

    def runs_controller(self, controller: SpecController | None) -> bool:
        if controller is None:
            return False
        if (controller.api_version, controller.kind) == (f"{GROUP}/{MPI_OPERATOR_VERSION}", "MPIJob"):
            return True  # the MPI Operator's own (rendered as one: `spec.mpi`)
        return controller.api_version == API_VERSION and controller.kind in CONTROLLER_KINDS

    def objects(self, ctx: Ctx) -> list[dict[str, Any]]:
        kind = _check(ctx)
        if kind is None:
            return []
        v2 = _mpi_v2(ctx.spec)
        controller = ctx.spec.controller if ctx.native else None
        types = {v.role: (controller.roles[v.role].name if controller is not None and v.role in controller.roles
                          else replica_type(v.role)) for v in ctx.roles}
        spec: dict[str, Any] = {
            kind.replica_specs: {types[v.role]: _replica_spec(ctx, v, kind, v2) for v in ctx.roles},
            "runPolicy": run_policy(ctx),
        }
        if kind.kind == "MPIJob":
            workers = [v for v in ctx.roles if v.role == "worker"]
            slots = controller.slots_per_worker if controller is not None else None
            spec["slotsPerWorker"] = slots or (workers[0].procs if workers else 1)
            impl = controller.mpi_implementation if controller is not None else None
            if impl not in (None, "OpenMPI"):
                ctx.warn(f"spec.controller.mpiImplementation {impl}: the kubeflow flavor renders an Open MPI MPIJob "
                         "(kubetrain's launcher runs Open MPI's mpirun), so the operator gives none of "
                         f"{impl}'s variables")
        if v2:
            assert ctx.ssh is not None and ctx.ssh.auth_path is not None
            spec["sshAuthMountPath"] = ctx.ssh.auth_path
            spec["mpiImplementation"] = "OpenMPI"  # the launcher's mpirun options are Open MPI's
        if kind.kind == "PyTorchJob":
            procs = max(v.procs for v in ctx.roles)
            if controller is not None and controller.nproc_per_node is not None:
                spec["nprocPerNode"] = controller.nproc_per_node
            elif controller is None and procs > 1:
                spec["nprocPerNode"] = str(procs)
            elastic = ctx.spec.elastic
            if controller is not None and controller.elastic_policy is not None:
                # The job file's own policy, as written: the operator gives torchrun its PET_* from it.
                spec["elasticPolicy"] = controller.elastic_policy.model_dump(by_alias=True, exclude_none=True)
            elif elastic is not None:
                spec["elasticPolicy"] = {
                    "minReplicas": elastic.min_replicas,
                    "maxReplicas": elastic.max_replicas,
                    "maxRestarts": elastic.max_restarts,
                    "rdzvBackend": "c10d",
                }
        api_version = MPIJOBS_V2.api_version if v2 else API_VERSION
        return [{"apiVersion": api_version, "kind": kind.kind,
                 "metadata": ctx.metadata(ctx.layout.base, queue_label=True), "spec": spec}]

    def ssh_keys(self, ctx: Ctx) -> Literal["plugin", "operator"] | None:
        """The MPI Operator makes the keys of its MPIJob (v2beta1)."""
        return "operator" if _mpi_v2(ctx.spec) else None

    def mpi_over_ssh(self, ctx: Ctx) -> bool:
        """The training operator's MPIJob (v1) launcher reaches its workers with kubectl exec."""
        return _mpi_v2(ctx.spec)

    # -- status ----------------------------------------------------------------------------------------

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        if not workloads:
            return out
        spec = workloads[0].get("spec") or {}
        for key, value in spec.items():
            if not key.endswith("ReplicaSpecs") or not isinstance(value, dict):
                continue
            for rtype, rspec in value.items():
                template = (rspec or {}).get("template") or {}
                out.append(RoleInfo(template_role(template, rtype.lower()), int((rspec or {}).get("replicas", 1)),
                                    container=first_container(template)))
        return out

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        kf = workloads[0]
        run_policy = (kf.get("spec") or {}).get("runPolicy") or {}
        limit = run_policy.get("backoffLimit")
        for ctype, phase in (("Failed", JobPhase.FAILED), ("Succeeded", JobPhase.SUCCEEDED)):
            c = true_condition(kf, ctype)
            if c:
                failed = phase is JobPhase.FAILED
                return EngineState(phase, c.get("reason") if failed else None, c.get("message") if failed else None,
                                   cond_time(c), 0, limit)
        if run_policy.get("suspend") or true_condition(kf, "Suspended"):
            state = suspended_phase(kf)
            state.backoff_limit = limit
            return state
        if true_condition(kf, "Restarting"):
            c = true_condition(kf, "Restarting") or {}
            return EngineState(JobPhase.RUNNING, "Restarting", c.get("message"), backoff_limit=limit)
        return EngineState(JobPhase.RUNNING, backoff_limit=limit)

    # -- control ---------------------------------------------------------------------------------------

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        kube.merge_patch(job.resource, meta(job.root)["name"], job.namespace,
                         {**paused_patch(suspend), "spec": {"runPolicy": {"suspend": suspend}}})

    def keeps_finished_pods(self, root: Mapping[str, Any]) -> bool:
        return ((root.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy") == "None"

    def scale(self, kube: Kube, job: FoundJob, replicas: int) -> None:
        """A PyTorchJob's Worker replicas, within its elasticPolicy's bounds: the operator creates or deletes
        the worker pods (as its own autoscaler does through the same field)."""
        from ....plan import check_scale

        spec = job.root.get("spec") or {}
        elastic = spec.get("elasticPolicy")
        specs_key = next((k for k in spec if k.endswith("ReplicaSpecs")), None)
        if not elastic or specs_key is None or "Worker" not in (spec.get(specs_key) or {}):
            raise KubernetesError(f"job {job.name} is not elastic (its {job.root.get('kind')} has no elasticPolicy "
                                  "and Worker replicas): its size is fixed; change spec.replicas and run it again")
        check_scale(replicas, int(elastic.get("minReplicas", 1)), int(elastic.get("maxReplicas", replicas)))
        kube.merge_patch(job.resource, meta(job.root)["name"], job.namespace,
                         {"spec": {specs_key: {"Worker": {"replicas": replicas}}}})


def _check(ctx: Ctx) -> KubeflowKind | None:
    """The kind for the job's framework, or None (a problem is recorded)."""
    from ..manifests.policy import check_common

    check_common(ctx)
    framework = ctx.spec.framework
    kind = record_of(framework).kubeflow
    controller = ctx.spec.controller
    if ctx.native and controller is not None:
        # A converted job renders back as its own kind, which holds a launcher only if it is an MPIJob.
        kind = replace(CONTROLLER_KINDS[controller.kind], launcher_role=controller.kind == "MPIJob")
    others = ctx.flavors_that(lambda f: f.every_framework)
    if kind is None:
        ctx.problems.unsupported(("spec", "framework"), f"framework {framework.value}", ctx.flavor.name, others,
                                 hint="the training operator has a kind per framework, none for generic jobs")
        return None
    if ctx.launcher_style and not kind.launcher_role:
        title = record_of(framework).title
        ctx.problems.unsupported(("spec", "roles", "launcher"), f"a {title} launcher role", ctx.flavor.name, others,
                                 hint=f"without a launcher role, {title} runs as a {kind.kind}")
        return None
    return kind


def _mpi_v2(spec: JobSpec | None) -> bool:
    return spec is not None and spec.mpi is not None and spec.mpi.mpi_job_version == MPI_OPERATOR_VERSION


def _replica_spec(ctx: Ctx, view: RoleView, kind: KubeflowKind, v2: bool) -> dict[str, Any]:
    from ..manifests.pod import PodStyle, pod_template
    from ..manifests.policy import role_policy

    launcher = kind.kind == "MPIJob" and view.role == "launcher"
    if v2:
        # The MPI Operator labels its workers with their index, not its launcher (the one replica, index 0);
        # it appends only OMPI_* variables kubetrain does not set otherwise, and the launcher reaches the
        # workers over ssh (no API token).
        style = PodStyle(index_env=INDEX_ENV, index_field_ref=None if launcher else INDEX_FIELD,
                         index_value="0" if launcher else None, container_name=kind.container,
                         port_name=kind.port_name, restart_policy=None)
    else:
        # MPIJob's launcher runs `kubectl exec` into the workers with the token the operator grants it.
        style = PodStyle(index_env=INDEX_ENV, index_field_ref=INDEX_FIELD, container_name=kind.container,
                         port_name=kind.port_name, restart_policy=None, engine_overrides=OPERATOR_ENV,
                         automount_token=True if launcher else None)
    return {
        "replicas": view.replicas,
        "restartPolicy": role_policy(ctx, view.role),
        "template": pod_template(ctx, view, style),
    }


FLAVOR = KubeflowFlavor(
    name="kubeflow",
    summary="PyTorchJob / TFJob / MPIJob / JAXJob (kubeflow.org/v1), by framework",
    group=GROUP,
    version=VERSION,
    resources=RESOURCES,
    install="the Kubeflow training operator v1 (https://github.com/kubeflow/trainer)",
    index_fields=(INDEX_FIELD,),
    features=FEATURES["kubeflow"],
    replaced_pods_are_restarts=True,
    controller=CONTROLLER,
)


def run_policy(ctx: Ctx) -> dict[str, Any]:
    """runPolicy: the training operator's own fields for the spec's runPolicy, restarts and gang."""
    from ..manifests.policy import gang_size, restarts_allowed, suspended

    policy = ctx.spec.run_policy
    out: dict[str, Any] = {}
    if policy.clean_pod_policy is not None:
        out["cleanPodPolicy"] = policy.clean_pod_policy
    if policy.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = policy.active_deadline_seconds
    out["backoffLimit"] = restarts_allowed(ctx)
    if suspended(ctx):
        out["suspend"] = True
    gang = gang_size(ctx)
    if gang is not None:
        scheduling: dict[str, Any] = {"minAvailable": gang}
        if ctx.spec.scheduling.queue:
            scheduling["queue"] = ctx.spec.scheduling.queue
        if ctx.spec.scheduling.priority_class:
            scheduling["priorityClass"] = ctx.spec.scheduling.priority_class
        out["schedulingPolicy"] = scheduling
    return out


__all__ = ["API_VERSION", "FLAVOR", "INDEX_ENV", "MPIJOBS_V2", "RESOURCES", "KubeflowFlavor", "replica_type"]
