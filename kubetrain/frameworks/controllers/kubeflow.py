"""The Kubeflow training operator's contracts (kubeflow.org/v1): PyTorchJob, TFJob, JAXJob, XGBoostJob,
PaddleJob — what `pkg/controller.v1/<kind>/` gives each container of a replica, written from that source:

- pytorch: envvar.go (`setPodEnv`), master.go (MASTER_*/PET_MASTER_*), elastic.go (PET_RDZV_*, PET_NNODES);
  the defaults of pytorchjob_defaults.go (nprocPerNode `auto`, port 23456, elastic bounds the worker replicas);
- tensorflow: tensorflow.go (`genTFConfigJSONStr`, `genClusterSpec`), pod.go (only when distributed);
- jax: envvar.go; xgboost: pod.go (`SetPodEnv`); paddlepaddle: envvar.go.

Every replica type gets a Service per replica named `<job>-<type>-<index>` (the host names the values use), and
its pods the operator's labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ...jobspec.errors import FieldError
from ..common import RoleWiring
from ..launchers import run_launcher
from ..values import Idx, Value
from .base import Contract, ContractContext, Row, role_wiring, service_names

GROUP_VERSION = "kubeflow.org/v1"
PYTORCH_PORT = 23456
TF_PORT = 2222
JAX_PORT = 6666
XGBOOST_PORT = 9999
PADDLE_PORT = 36543
LABELS = "training.kubeflow.org"


def _type(cctx: ContractContext, role: str | None = None) -> str:
    """The replica type as the operator writes it in names and values: lowercase."""
    return cctx.source_name(role).lower()


def _names(cctx: ContractContext) -> dict[str, int]:
    """The Service the operator makes for each replica, `<job>-<type>-<index>`, in every form it resolves by."""
    out: dict[str, int] = {}
    for i in range(cctx.replicas()):
        for form in service_names(f"{cctx.name}-{_type(cctx)}-{i}", cctx.namespace):
            out[form] = i
    return out


def _labels(cctx: ContractContext, operator: str, master: bool = False) -> dict[str, Value]:
    labels: dict[str, Value] = {
        f"{LABELS}/operator-name": operator,
        f"{LABELS}/job-name": cctx.name,
        f"{LABELS}/replica-type": _type(cctx),
        f"{LABELS}/replica-index": (Idx(),),
    }
    if master:
        labels[f"{LABELS}/job-role"] = "master"
    return labels


def _wired(cctx: ContractContext, env: dict[str, Value], operator: str, *, master: bool = False,
           by_index: dict[int, dict[str, Value]] | None = None) -> RoleWiring:
    return role_wiring(
        cctx,
        env,
        by_index=by_index,
        labels=_labels(cctx, operator, master),
        pod_name=(f"{cctx.name}-{_type(cctx)}-", Idx()),
        names=_names(cctx),
    )


def _total(cctx: ContractContext) -> int:
    return sum(cctx.roles.values())


# -- PyTorchJob ------------------------------------------------------------------------------------------


def _nproc(cctx: ContractContext) -> str | None:
    """spec.nprocPerNode after the operator's defaulting: `auto` unless elasticPolicy.nProcPerNode is given."""
    elastic = cctx.controller.elastic_policy
    given = cctx.controller.nproc_per_node
    if given is None and (elastic is None or elastic.n_proc_per_node is None):
        return "auto"
    return given


def wire_pytorchjob(cctx: ContractContext) -> RoleWiring:
    master = cctx.role_of("Master")
    worker = cctx.role_of("Worker")
    total = _total(cctx)
    nproc = _nproc(cctx)
    env: dict[str, Value] = {"PYTHONUNBUFFERED": "0"}
    if master is not None:
        # master.go: the master's Service and its pytorchjob-port, under both names.
        env.update({"MASTER_PORT": str(cctx.port(master)), "PET_MASTER_PORT": str(cctx.port(master)),
                    "MASTER_ADDR": cctx.host(master, 0), "PET_MASTER_ADDR": cctx.host(master, 0)})
        rank: Value = (Idx(1, 1 if cctx.role == worker else 0),)
        env["WORLD_SIZE"] = str(total * (int(nproc) if nproc is not None and nproc.isdigit() else 1))
        env["RANK"] = rank
        if nproc is not None:
            env["PET_NPROC_PER_NODE"] = nproc
        env["PET_NODE_RANK"] = rank
    elastic = cctx.controller.elastic_policy
    if elastic is not None:
        workers = cctx.replicas(worker) if worker is not None else 0
        host = elastic.rdzv_host or (cctx.host(worker, 0) if worker is not None else f"{cctx.name}-worker-0")
        host = _local_host(cctx, host)
        port = elastic.rdzv_port or (cctx.port(worker) if worker is not None else PYTORCH_PORT)
        env["PET_RDZV_ENDPOINT"] = f"{host}:{port}"
        env["PET_RDZV_BACKEND"] = elastic.rdzv_backend or "c10d"
        low = elastic.min_replicas or elastic.max_replicas or workers
        high = elastic.max_replicas or elastic.min_replicas or workers
        env["PET_NNODES"] = f"{low}:{high}"
        if elastic.max_restarts is not None:
            env["PET_MAX_RESTARTS"] = str(elastic.max_restarts)
        if elastic.n_proc_per_node is not None:
            env["PET_NPROC_PER_NODE"] = str(elastic.n_proc_per_node)
        if elastic.rdzv_id is not None:
            env["PET_RDZV_ID"] = elastic.rdzv_id
        if elastic.rdzv_conf:
            env["PET_RDZV_CONF"] = ",".join(f"{o.key}={o.value}" for o in elastic.rdzv_conf)
        if elastic.standalone:
            env["PET_STANDALONE"] = ""
    else:
        env["PET_NNODES"] = str(total)
    return _wired(cctx, env, "pytorchjob-controller", master=cctx.role == master)


def _local_host(cctx: ContractContext, host: str) -> str:
    """A host name the source writes (elasticPolicy.rdzvHost): the replica it names, where it names one."""
    for role in cctx.roles:
        for i in range(cctx.replicas(role)):
            if host in service_names(f"{cctx.name}-{_type(cctx, role)}-{i}", cctx.namespace):
                return cctx.host(role, i)
    return host


def pytorchjob_local_problems(cctx: ContractContext) -> list[FieldError]:
    """nprocPerNode N > 1 with a command that is no launcher: the operator starts one process per pod and counts
    N in WORLD_SIZE, so the processes would wait for ranks that never start."""
    nproc = _nproc(cctx)
    if nproc is None or not nproc.isdigit() or int(nproc) <= 1 or cctx.role_of("Master") is None:
        return []
    if run_launcher(cctx.ctx.settings.run) is not None or cctx.ctx.settings.run is None:
        return []
    run = cctx.ctx.settings.run
    if run.entrypoint is not None:
        return []
    world = _total(cctx) * int(nproc)
    return [FieldError(
        ("spec", "controller", "nprocPerNode"),
        f"is {nproc}, yet the {cctx.role} command is not a launcher: the training operator starts one process "
        f"per pod and sets WORLD_SIZE={world}, so its {_total(cctx)} processes would wait for ranks that never "
        "start",
        hint="run the command under torchrun (command: [torchrun, train.py]), which starts nprocPerNode "
        "processes per pod, or drop nprocPerNode",
    )]


_PT_SAMPLE = {
    "apiVersion": GROUP_VERSION,
    "kind": "PyTorchJob",
    "metadata": {"name": "pt"},
    "spec": {
        "nprocPerNode": "2",
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "trainer:1", "command": ["torchrun", "train.py"]}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "trainer:1", "command": ["torchrun", "train.py"]}]}}},
        },
    },
}
_PT_ELASTIC = {
    "apiVersion": GROUP_VERSION,
    "kind": "PyTorchJob",
    "metadata": {"name": "pte"},
    "spec": {
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 2, "rdzvId": "run-1",
                          "rdzvConf": [{"key": "last_call_timeout", "value": "1"}]},
        "pytorchReplicaSpecs": {
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "trainer:1", "command": ["torchrun", "train.py"]}]}}},
        },
    },
}

PYTORCHJOB = Contract(
    GROUP_VERSION,
    "PyTorchJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/pytorch: envvar.go setPodEnv, master.go, elastic.go; "
    "apis/kubeflow.org/v1 pytorchjob_defaults.go",
    wire_pytorchjob,
    lambda _controller, _type: PYTORCH_PORT,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod "
            "(a `torchrun` is the only launcher: it reads the PET_* variables)", example={}),
        Row("env", "PYTHONUNBUFFERED", "every replica", '"0"', example={"*": "0"}),
        Row("env", "MASTER_ADDR", "with a Master", "`<job>-master-0`, the master's Service", "its address",
            example={"*": "{host:master-0}"}),
        Row("env", "PET_MASTER_ADDR", "with a Master", "as MASTER_ADDR", "its address",
            example={"*": "{host:master-0}"}),
        Row("env", "MASTER_PORT", "with a Master", "the Master's `pytorchjob-port` (default 23456)",
            "the master's own port on this machine", example={"*": "{port:master-0}"}),
        Row("env", "PET_MASTER_PORT", "with a Master", "as MASTER_PORT", "the master's own port",
            example={"*": "{port:master-0}"}),
        Row("env", "WORLD_SIZE", "with a Master", "replicas × nprocPerNode (1 when nprocPerNode is not a number)",
            example={"*": "6"}),
        Row("env", "RANK", "with a Master", "Master 0, Worker i: i + 1 (the node's rank)",
            example={"master-0": "0", "worker-0": "1", "worker-1": "2"}),
        Row("env", "PET_NODE_RANK", "with a Master", "as RANK",
            example={"master-0": "0", "worker-0": "1", "worker-1": "2"}),
        Row("env", "PET_NPROC_PER_NODE", "with a Master", "spec.nprocPerNode as written (default `auto`); "
            "elasticPolicy.nProcPerNode, where given, over it", example={"*": "2"}),
        Row("env", "PET_NNODES", "every replica", "the replicas; with elasticPolicy `min:max`",
            example={"*": "3"}),
        Row("env", "PET_RDZV_ENDPOINT", "with elasticPolicy", "rdzvHost (default `<job>-worker-0`) : rdzvPort "
            "(default the Worker's pytorchjob-port)", "a rendezvous file in the job's folder (c10d), so that losing "
            "worker 0 ends no rendezvous", example={"*": "{addr:worker-0}"}, sample="elastic", cluster_only=True),
        Row("env", "PET_RDZV_BACKEND", "with elasticPolicy", "rdzvBackend (default c10d)", example={"*": "c10d"},
            sample="elastic"),
        Row("env", "PET_NNODES", "with elasticPolicy", "`minReplicas:maxReplicas` (each the other, else the "
            "worker replicas, when not given)", example={"*": "1:3"}, sample="elastic"),
        Row("env", "PET_MAX_RESTARTS", "with elasticPolicy.maxRestarts", "maxRestarts", example={"*": "2"},
            sample="elastic"),
        Row("env", "PET_RDZV_ID", "with elasticPolicy.rdzvId", "rdzvId", example={"*": "run-1"},
            sample="elastic"),
        Row("env", "PET_RDZV_CONF", "with elasticPolicy.rdzvConf", "`key=value` pairs joined by commas",
            "`store_type=file` before them (the rendezvous file)", example={"*": "last_call_timeout=1"},
            sample="elastic", cluster_only=True),
        Row("env", "PET_STANDALONE", "with elasticPolicy.standalone: true", '""', example={"*": None},
            sample="elastic"),
        Row("host", "<job>-<type>-<i>", "each replica", "a Service per replica (also `.<namespace>`, "
            "`.<namespace>.svc`, `.<namespace>.svc.cluster.local`)", "127.0.0.1 in env values; warned in "
            "commands", example={"master-0": "pt-master-0", "worker-1": "pt-worker-1"}),
        Row("label", f"{LABELS}/replica-index", "each replica", "its index within its type",
            example={"master-0": "0", "worker-1": "1"}),
        Row("label", f"{LABELS}/replica-type", "each replica", "its type, lowercase",
            example={"master-0": "master", "worker-0": "worker"}),
        Row("label", f"{LABELS}/job-name", "each replica", "the job's name", example={"*": "pt"}),
    ),
    {"main": _PT_SAMPLE, "elastic": _PT_ELASTIC},
    native_flavor="kubeflow",
    local_problems=pytorchjob_local_problems,
    notes=(
        "Without a Master and without elasticPolicy, the operator gives no MASTER_ADDR, WORLD_SIZE or RANK: "
        "neither does kubetrain.",
        "nprocPerNode > 1 with a command that is no launcher is refused locally: the operator counts "
        "nprocPerNode processes per pod in WORLD_SIZE but starts one.",
    ),
)


# -- TFJob -------------------------------------------------------------------------------------------------

EVALUATOR = "evaluator"


def tf_config(cctx: ContractContext) -> Value | None:
    """tensorflow.go: the cluster by replica type (lowercase; the evaluator out of it), every replica at its
    Service `<job>-<type>-<i>.<namespace>.svc:<port>`, this task, environment `cloud`; Go writes the map's
    keys sorted and no spaces. None when the job is not distributed (one replica in all)."""
    if _total(cctx) == 1:
        return None
    cluster = {
        _type(cctx, role): [cctx.address(role, i) for i in range(n)]
        for role, n in cctx.roles.items()
        if _type(cctx, role) != EVALUATOR
    }
    text = json.dumps({"cluster": dict(sorted(cluster.items())), "task": {"type": _type(cctx), "index": 0},
                       "environment": "cloud"}, separators=(",", ":"))
    head, _, tail = text.partition('"index":0')
    return (head + '"index":', Idx(), tail)


def wire_tfjob(cctx: ContractContext) -> RoleWiring:
    config = tf_config(cctx)
    env: dict[str, Value] = {} if config is None else {"TF_CONFIG": config}
    return _wired(cctx, env, "tfjob-controller", master=_type(cctx) in ("chief", "master"))


_TF_SAMPLE = {
    "apiVersion": GROUP_VERSION,
    "kind": "TFJob",
    "metadata": {"name": "tf"},
    "spec": {"tfReplicaSpecs": {
        "Chief": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "tf:2", "command": ["python", "train.py"]}]}}},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "tf:2", "command": ["python", "train.py"]}]}}},
        "PS": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "tf:2", "command": ["python", "train.py"]}]}}},
    }},
}
_TF_CLUSTER = ('"cluster":{"chief":["{addr:chief-0}"],"ps":["{addr:ps-0}"],'
               '"worker":["{addr:worker-0}","{addr:worker-1}"]}')

TFJOB = Contract(
    GROUP_VERSION,
    "TFJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/tensorflow: tensorflow.go genTFConfigJSONStr, "
    "genClusterSpec; pod.go (TF_CONFIG only for a distributed job)",
    wire_tfjob,
    lambda _controller, _type: TF_PORT,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "TF_CONFIG", "every replica, when the job has more than one replica",
            '`{"cluster":{<type>:["<job>-<type>-<i>.<namespace>.svc:<port>", ...]},"task":{"type":<type>,'
            '"index":<i>},"environment":"cloud"}`: every type but the evaluator, types lowercase and sorted, '
            "the port the type's `tfjob-port` (default 2222)", "every address this machine's, each replica's "
            "own port",
            example={"chief-0": "{" + _TF_CLUSTER + ',"task":{"type":"chief","index":0},"environment":"cloud"}',
                     "worker-1": "{" + _TF_CLUSTER + ',"task":{"type":"worker","index":1},"environment":"cloud"}',
                     "ps-0": "{" + _TF_CLUSTER + ',"task":{"type":"ps","index":0},"environment":"cloud"}'}),
        Row("host", "<job>-<type>-<i>", "each replica", "a Service per replica (and its namespace forms)",
            "127.0.0.1 in env values; warned in commands", example={"worker-1": "tf-worker-1"}),
        Row("label", f"{LABELS}/replica-index", "each replica", "its index within its type",
            example={"worker-1": "1"}),
    ),
    {"main": _TF_SAMPLE},
    native_flavor="kubeflow",
    notes=("A TFJob's `Master` type is `master` in TF_CONFIG (kubetrain's role is chief).",),
)


# -- JAXJob ------------------------------------------------------------------------------------------------


def wire_jaxjob(cctx: ContractContext) -> RoleWiring:
    worker = cctx.role_of("Worker") or cctx.role
    env: dict[str, Value] = {
        "PYTHONUNBUFFERED": "1",
        "COORDINATOR_PORT": str(cctx.port(worker)),
        "COORDINATOR_ADDRESS": cctx.host(worker, 0),
        "NUM_PROCESSES": str(_total(cctx)),
        "PROCESS_ID": (Idx(),),
    }
    return _wired(cctx, env, "jaxjob-controller")


JAXJOB = Contract(
    GROUP_VERSION,
    "JAXJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/jax/envvar.go setPodEnv",
    wire_jaxjob,
    lambda _controller, _type: JAX_PORT,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "PYTHONUNBUFFERED", "every replica", '"1"', example={"*": "1"}),
        Row("env", "COORDINATOR_ADDRESS", "every replica", "`<job>-worker-0`", "worker 0's address",
            example={"*": "{host:worker-0}"}),
        Row("env", "COORDINATOR_PORT", "every replica", "the Worker's `jaxjob-port` (default 6666)",
            "worker 0's own port", example={"*": "{port:worker-0}"}),
        Row("env", "NUM_PROCESSES", "every replica", "the replicas", example={"*": "2"}),
        Row("env", "PROCESS_ID", "every replica", "its index", example={"worker-0": "0", "worker-1": "1"}),
        Row("host", "<job>-worker-<i>", "each replica", "a Service per replica", "127.0.0.1 in env values",
            example={"worker-1": "jax-worker-1"}),
    ),
    {"main": {"apiVersion": GROUP_VERSION, "kind": "JAXJob", "metadata": {"name": "jax"}, "spec": {
        "jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "jax", "image": "jax:1", "command": ["python3", "train.py"]}]}}}}}}},
    native_flavor="kubeflow",
    notes=("kubetrain's jax framework variables (JAX_COORDINATOR_ADDRESS, ...) are not given: the operator "
           "does not give them.",),
)


# -- XGBoostJob --------------------------------------------------------------------------------------------


def wire_xgboostjob(cctx: ContractContext) -> RoleWiring:
    master = cctx.role_of("Master")
    worker = cctx.role_of("Worker")
    total = _total(cctx)
    offset = cctx.replicas(master) if master is not None and cctx.role == worker else 0
    env: dict[str, Value] = {
        "MASTER_PORT": str(cctx.port(master)) if master is not None else str(XGBOOST_PORT),
        "MASTER_ADDR": cctx.host(master, 0) if master is not None else f"{cctx.name}-master-0",
        "WORLD_SIZE": str(total),
        "RANK": (Idx(1, offset),),
        "PYTHONUNBUFFERED": "0",
    }
    if total > 1 and worker is not None:
        # pod.go lists `<job>-worker-<i>` for i below total - 1 (the replicas but the master), by name only.
        env["WORKER_PORT"] = str(cctx.port(worker))
        env["WORKER_ADDRS"] = ",".join(cctx.host(worker, i) if i < cctx.replicas(worker)
                                       else f"{cctx.name}-worker-{i}" for i in range(total - 1))
    return _wired(cctx, env, "xgboostjob-controller", master=cctx.role == master)


XGBOOSTJOB = Contract(
    GROUP_VERSION,
    "XGBoostJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/xgboost/pod.go SetPodEnv",
    wire_xgboostjob,
    lambda _controller, _type: XGBOOST_PORT,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "MASTER_ADDR", "every replica", "`<job>-master-0` (the Rabit tracker)", "its address",
            example={"*": "{host:master-0}"}),
        Row("env", "MASTER_PORT", "every replica", "the Master's `xgboostjob-port` (default 9999)",
            "the master's own port", example={"*": "{port:master-0}"}),
        Row("env", "WORLD_SIZE", "every replica", "the replicas", example={"*": "3"}),
        Row("env", "RANK", "every replica", "Master i: i; Worker i: i + the Master replicas",
            example={"master-0": "0", "worker-0": "1", "worker-1": "2"}),
        Row("env", "PYTHONUNBUFFERED", "every replica", '"0"', example={"*": "0"}),
        Row("env", "WORKER_PORT", "with more than one replica", "the Worker's `xgboostjob-port`",
            "worker 0's own port (LightGBM's workers share one port on a cluster)",
            example={"*": "{port:worker-0}"}),
        Row("env", "WORKER_ADDRS", "with more than one replica", "`<job>-worker-<i>` for i below the replicas "
            "less one, joined by commas", "the workers' addresses", example={"*": "{host:worker-0},{host:worker-1}"}),
        Row("host", "<job>-<type>-<i>", "each replica", "a Service per replica", "127.0.0.1 in env values",
            example={"worker-1": "xgb-worker-1"}),
    ),
    {"main": {"apiVersion": GROUP_VERSION, "kind": "XGBoostJob", "metadata": {"name": "xgb"}, "spec": {
        "xgbReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "xgboost", "image": "xgb:1", "command": ["python", "main.py"]}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "xgboost", "image": "xgb:1", "command": ["python", "main.py"]}]}}}}}}},
    native_flavor="kubeflow",
)


# -- PaddleJob ---------------------------------------------------------------------------------------------


def wire_paddlejob(cctx: ContractContext) -> RoleWiring:
    master = cctx.role_of("Master")
    worker = cctx.role_of("Worker")
    env: dict[str, Value] = {
        "PYTHONUNBUFFERED": "0",
        "PADDLE_JOB_ID": cctx.name,
        "PADDLE_NNODES": str(_total(cctx)),
    }
    # The rendezvous is master 0 (parameter-server mode) or worker 0 (collective mode): it gets its own pod IP
    # (POD_IP_DUMMY, the downward API's status.podIP), every other replica its Service.
    rendezvous = master if master is not None else worker
    by_index: dict[int, dict[str, Value]] = {}
    if rendezvous is not None:
        port = cctx.port(rendezvous)
        env["PADDLE_MASTER"] = f"{cctx.host(rendezvous, 0)}:{port}"
        if cctx.role == rendezvous:
            own = cctx.host(rendezvous, 0)
            by_index[0] = {"POD_IP_DUMMY": own, "PADDLE_MASTER": f"{own}:{port}"}
    if master is not None:
        env["PADDLE_SERVER_NUM" if cctx.role == master else "PADDLE_TRAINER_NUM"] = "1"
    return _wired(cctx, env, "paddlejob-controller", master=cctx.role == master, by_index=by_index)


PADDLEJOB = Contract(
    GROUP_VERSION,
    "PaddleJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/paddlepaddle/envvar.go setPodEnv",
    wire_paddlejob,
    lambda _controller, _type: PADDLE_PORT,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "PYTHONUNBUFFERED", "every replica", '"0"', example={"*": "0"}),
        Row("env", "PADDLE_JOB_ID", "every replica", "the job's name", example={"*": "paddle"}),
        Row("env", "PADDLE_NNODES", "every replica", "the replicas", example={"*": "2"}),
        Row("env", "PADDLE_MASTER", "every replica", "`<job>-worker-0:<port>` (collective; `<job>-master-0` "
            "with a Master), the port the `master` port (default 36543); the rendezvous replica itself "
            "`$(POD_IP_DUMMY):<port>`", "the rendezvous replica's address and own port",
            example={"*": "{addr:worker-0}"}),
        Row("env", "POD_IP_DUMMY", "the rendezvous replica", "the downward API's status.podIP",
            "its address (on a flavor without the operator: its DNS name)",
            example={"worker-0": "{host:worker-0}", "worker-1": None}),
        Row("env", "PADDLE_SERVER_NUM", "with a Master: the Master", '"1"', example={"*": None}),
        Row("env", "PADDLE_TRAINER_NUM", "with a Master: the Workers", '"1"', example={"*": None}),
        Row("host", "<job>-<type>-<i>", "each replica", "a Service per replica", "127.0.0.1 in env values",
            example={"worker-1": "paddle-worker-1"}),
    ),
    {"main": {"apiVersion": GROUP_VERSION, "kind": "PaddleJob", "metadata": {"name": "paddle"}, "spec": {
        "paddleReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "paddle", "image": "paddle:2", "command": ["python", "-m", "paddle.distributed.launch",
                                                                  "train.py"]}]}}}}}}},
    native_flavor="kubeflow",
)

CONTRACTS: tuple[Contract, ...] = (PYTORCHJOB, TFJOB, JAXJOB, XGBOOSTJOB, PADDLEJOB)

Wire = Callable[[ContractContext], RoleWiring]

__all__ = ["CONTRACTS", "JAXJOB", "PADDLEJOB", "PYTORCHJOB", "TFJOB", "XGBOOSTJOB", "tf_config"]
