"""Flavor `kubeflow`: the training operator's kubeflow.org/v1 kinds, chosen by framework.

| framework                    | kind       | replica types                   | container / port name |
|------------------------------|------------|---------------------------------|-----------------------|
| pytorch, deepspeed (no launcher) | PyTorchJob | Master, Worker              | pytorch / pytorchjob-port |
| tensorflow                   | TFJob      | Chief, Worker, PS, Evaluator    | tensorflow / tfjob-port |
| mpi                          | MPIJob     | Launcher, Worker                | mpi / -               |
| jax                          | JAXJob     | Worker                          | jax / jaxjob-port     |

Replica `i` of type `r` is the pod (and per-replica Service) `<base>-<r>-<i>`. The operator sets its own
RANK / TF_CONFIG / MASTER_ADDR; kubetrain's start-up script exports the same contract as on every other
flavor over them (same values where both set one), so a program sees identical variables everywhere.
The replica index comes from the operator's `training.kubeflow.org/replica-index` pod label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....contract import env_names
from ....jobspec import Framework
from .context import Ctx, Layout, RoleView, base_name, room_for_base
from .pod import PodStyle, pod_template
from .policy import check_common, kubeflow_run_policy

API_VERSION = "kubeflow.org/v1"
INDEX_ENV = env_names.REPLICA_INDEX
INDEX_FIELD = "metadata.labels['training.kubeflow.org/replica-index']"
OPERATOR_ENV = ("PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                "TF_CONFIG", "PET_*")
"""Variables the training operator appends to the container's env (after kubetrain's, so they would win)."""


@dataclass(frozen=True)
class Kind:
    kind: str
    replica_specs: str
    container: str
    port_name: str


KINDS: dict[Framework, Kind] = {
    Framework.PYTORCH: Kind("PyTorchJob", "pytorchReplicaSpecs", "pytorch", "pytorchjob-port"),
    Framework.DEEPSPEED: Kind("PyTorchJob", "pytorchReplicaSpecs", "pytorch", "pytorchjob-port"),
    Framework.TENSORFLOW: Kind("TFJob", "tfReplicaSpecs", "tensorflow", "tfjob-port"),
    Framework.MPI: Kind("MPIJob", "mpiReplicaSpecs", "mpi", "mpijob-port"),
    Framework.JAX: Kind("JAXJob", "jaxReplicaSpecs", "jax", "jaxjob-port"),
}

_REPLICA_TYPES = {"ps": "PS"}


def replica_type(role: str) -> str:
    return _REPLICA_TYPES.get(role, role.capitalize())


def layout(name: str, counts: dict[str, int]) -> Layout:
    # The operator names a Service after each replica: the job name must start with a letter.
    base = base_name(name, room_for_base(counts, 0), rfc1035=True)
    return Layout(base, f"{base}-{{role}}-{{index}}", None, INDEX_ENV)


def check(ctx: Ctx) -> Kind | None:
    check_common(ctx, suspend=True, deadline=True, exit_code_overrides=False, terminate_after_preemption=False,
                 clean_pod_policies=("All", "Running", "None"))
    framework = ctx.spec.framework
    if framework is Framework.DEEPSPEED and ctx.launcher_style:
        ctx.problems.unsupported(("spec", "roles", "launcher"), "a DeepSpeed launcher role", ctx.flavor,
                                 ("job", "jobset", "volcano"),
                                 hint="without a launcher role, DeepSpeed runs as a PyTorchJob")
        return None
    kind = KINDS.get(framework)
    if kind is None:
        ctx.problems.unsupported(("spec", "framework"), f"framework {framework.value}", ctx.flavor,
                                 ("job", "jobset", "volcano"),
                                 hint="the training operator has a kind per framework, none for generic jobs")
    return kind


def replica_spec(ctx: Ctx, view: RoleView, kind: Kind) -> dict[str, Any]:
    # MPIJob's launcher runs `kubectl exec` into the workers with the token the operator grants it.
    launcher = kind.kind == "MPIJob" and view.role == "launcher"
    style = PodStyle(index_env=INDEX_ENV, index_field_ref=INDEX_FIELD, container_name=kind.container,
                     port_name=kind.port_name, restart_policy=None, engine_overrides=OPERATOR_ENV,
                     automount_token=True if launcher else None)
    return {
        "replicas": view.replicas,
        "restartPolicy": ctx.spec.restart_policy,
        "template": pod_template(ctx, view, style),
    }


def build(ctx: Ctx) -> list[dict[str, Any]]:
    kind = check(ctx)
    if kind is None:
        return []
    spec: dict[str, Any] = {
        kind.replica_specs: {replica_type(v.role): replica_spec(ctx, v, kind) for v in ctx.roles},
        "runPolicy": kubeflow_run_policy(ctx),
    }
    if kind.kind == "MPIJob":
        workers = [v for v in ctx.roles if v.role == "worker"]
        spec["slotsPerWorker"] = workers[0].procs if workers else 1
    if kind.kind == "PyTorchJob":
        procs = max(v.procs for v in ctx.roles)
        if procs > 1:
            spec["nprocPerNode"] = str(procs)
        elastic = ctx.spec.elastic
        if elastic is not None:
            spec["elasticPolicy"] = {
                "minReplicas": elastic.min_replicas,
                "maxReplicas": elastic.max_replicas,
                "maxRestarts": elastic.max_restarts,
                "rdzvBackend": "c10d",
            }
    return [{"apiVersion": API_VERSION, "kind": kind.kind,
             "metadata": ctx.metadata(ctx.layout.base, queue_label=True), "spec": spec}]


__all__ = ["API_VERSION", "KINDS", "build", "layout", "replica_type"]
