"""JobSet's contract (jobset.x-k8s.io/v1alpha2), and the Job controller's under it: what a pod of a JobSet
gets, written from kubernetes-sigs/jobset pkg/controllers/jobset_controller.go (`constructJob`,
`labelAndAnnotateObject`, `GetSubdomain`) and the Job controller's Indexed completion mode.

Each replicated Job `rj` with `replicas` J and `parallelism` P is J Jobs `<js>-<rj>-<j>` of P pods; kubetrain's
role has J × P replicas, replica r being pod p = r mod P of Job j = r div P. A pod's hostname is
`<js>-<rj>-<j>-<p>` in the subdomain (network.subdomain, else the JobSet's name: a headless Service of that
name); JobSet labels and annotates it, and the Job controller gives it its completion index (the
JOB_COMPLETION_INDEX variable, the `batch.kubernetes.io/job-completion-index` annotation and label). JobSet sets
no variable of its own: programs read these through the downward API.
"""

from __future__ import annotations

from ...jobspec.controller import Controller
from ..common import RoleWiring
from ..values import Idx, Value
from .base import Contract, ContractContext, Row, role_wiring, service_names

API_VERSION = "jobset.x-k8s.io/v1alpha2"
PREFIX = "jobset.sigs.k8s.io"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def jobs_of(cctx: ContractContext, role: str | None = None) -> int:
    """The replicated Job's Jobs (its `replicas`)."""
    found = cctx.controller.roles.get(role or cctx.role)
    return found.jobs if found is not None and found.jobs else 1


def parallelism(cctx: ContractContext, role: str | None = None) -> int:
    """Pods per Job: the role's replicas over its Jobs."""
    return max(1, cctx.replicas(role) // jobs_of(cctx, role))


def subdomain(cctx: ContractContext) -> str:
    return cctx.controller.subdomain or cctx.name


def wire_jobset(cctx: ContractContext) -> RoleWiring:
    rj = cctx.source_name()
    jobs, pods = jobs_of(cctx), parallelism(cctx)
    job_index = (Idx(div=pods),)
    completion = (Idx(mod=pods),)
    total_jobs = sum(jobs_of(cctx, role) for role in cctx.roles)
    before = 0
    for role in cctx.roles:
        if role == cctx.role:
            break
        before += jobs_of(cctx, role)
    meta: dict[str, Value] = {
        f"{PREFIX}/jobset-name": cctx.name,
        f"{PREFIX}/replicatedjob-name": rj,
        f"{PREFIX}/replicatedjob-replicas": str(jobs),
        f"{PREFIX}/global-replicas": str(total_jobs),
        f"{PREFIX}/job-index": job_index,
        f"{PREFIX}/job-global-index": (Idx(div=pods, offset=before),),
        f"{PREFIX}/restart-attempt": "0",
    }
    job_name: Value = (f"{cctx.name}-{rj}-", Idx(div=pods))
    labels: dict[str, Value] = {**meta, COMPLETION_INDEX: completion, "job-name": job_name,
                                "batch.kubernetes.io/job-name": job_name}
    annotations: dict[str, Value] = {**meta, COMPLETION_INDEX: completion}
    exclusive = cctx.ctx.annotations.get(EXCLUSIVE)
    if exclusive is not None:
        annotations[EXCLUSIVE] = exclusive
    names: dict[str, int] = {}
    for r in range(cctx.replicas()):
        host = f"{cctx.name}-{rj}-{r // pods}-{r % pods}"
        for form in service_names(f"{host}.{subdomain(cctx)}", cctx.namespace):
            names[form] = r
    env: dict[str, Value] = {"JOB_COMPLETION_INDEX": completion}
    hostname: Value = (f"{cctx.name}-{rj}-", Idx(div=pods), "-", Idx(mod=pods))
    return role_wiring(cctx, env, labels=labels, annotations=annotations, pod_name=hostname, names=names)


def default_port(_controller: Controller, _job: str) -> int:
    return 29500  # JobSet opens no port: the one kubetrain's own replicas would use


_SAMPLE = {
    "apiVersion": API_VERSION,
    "kind": "JobSet",
    "metadata": {"name": "js"},
    "spec": {
        "network": {"subdomain": "net"},
        "replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1,
                                                                    "template": {"spec": {"containers": [
                {"name": "main", "image": "app:1", "command": ["python", "drive.py"]}]}}}}},
            {"name": "slice", "replicas": 2, "template": {"spec": {"parallelism": 2, "completions": 2,
                                                                   "template": {"spec": {"containers": [
                {"name": "main", "image": "app:1", "command": ["python", "work.py"]}]}}}}},
        ],
    },
}

JOBSET = Contract(
    API_VERSION,
    "JobSet",
    "the JobSet controller (and the Job controller under it)",
    "kubernetes-sigs/jobset pkg/controllers/jobset_controller.go constructJob, labelAndAnnotateObject, "
    "GetSubdomain; Kubernetes' Job controller (Indexed completion mode)",
    wire_jobset,
    default_port,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "JOB_COMPLETION_INDEX", "every pod (Job controller)", "the pod's index in its Job",
            example={"driver-0": "0", "slice-0": "0", "slice-1": "1", "slice-2": "0", "slice-3": "1"}),
        Row("annotation", COMPLETION_INDEX, "every pod (Job controller; also a label)", "as JOB_COMPLETION_INDEX",
            example={"slice-1": "1", "slice-2": "0"}),
        Row("label", f"{PREFIX}/jobset-name", "every pod (also an annotation)", "the JobSet's name",
            example={"*": "js"}),
        Row("label", f"{PREFIX}/replicatedjob-name", "every pod (also an annotation)", "its replicated Job",
            example={"driver-0": "driver", "slice-3": "slice"}),
        Row("label", f"{PREFIX}/replicatedjob-replicas", "every pod (also an annotation)",
            "the replicated Job's replicas (Jobs)", example={"driver-0": "1", "slice-0": "2"}),
        Row("label", f"{PREFIX}/job-index", "every pod (also an annotation)", "its Job's index in the "
            "replicated Job", example={"slice-1": "0", "slice-2": "1", "slice-3": "1"}),
        Row("label", f"{PREFIX}/global-replicas", "every pod (also an annotation)", "the Jobs of the JobSet",
            example={"*": "3"}),
        Row("label", f"{PREFIX}/job-global-index", "every pod (also an annotation)", "its Job's index among all "
            "the JobSet's Jobs", example={"driver-0": "0", "slice-0": "1", "slice-3": "2"}),
        Row("label", f"{PREFIX}/restart-attempt", "every pod (also an annotation)", "the JobSet's restarts",
            "0: a local restart restarts the replicas, not the set", example={"*": "0"}),
        Row("label", "job-name", "every pod (Job controller; also batch.kubernetes.io/job-name)",
            "`<js>-<rj>-<j>`", example={"driver-0": "js-driver-0", "slice-2": "js-slice-1"}),
        Row("annotation", EXCLUSIVE, "every pod, when the JobSet (or its replicated Job) has it",
            "the JobSet's annotation", "not used locally (one machine)"),
        Row("host", "<js>-<rj>-<j>-<p>.<subdomain>", "each pod", "hostname `<js>-<rj>-<j>-<p>` in the subdomain "
            "(network.subdomain, default the JobSet's name; and its namespace forms)", "127.0.0.1 in env "
            "values; warned in commands", example={"slice-2": "js-slice-1-0.net", "driver-0": "js-driver-0-0.net"}),
        Row("host", "pod name", "every pod", "`<js>-<rj>-<j>-<p>-<random>` (fieldRef metadata.name)",
            "`<js>-<rj>-<j>-<p>`, its hostname", example={}),
    ),
    {"main": _SAMPLE},
    native_flavor="jobset",
    notes=(
        "`jobset.sigs.k8s.io/job-key` (a hash of the Job's namespaced name) is not given.",
        "A replicated Job of several Jobs (replicas × parallelism) is one role of J × P replicas, each Job's "
        "pods consecutive.",
    ),
)

CONTRACTS: tuple[Contract, ...] = (JOBSET,)

__all__ = ["COMPLETION_INDEX", "CONTRACTS", "EXCLUSIVE", "JOBSET", "jobs_of", "parallelism", "subdomain"]
