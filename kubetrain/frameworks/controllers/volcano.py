"""Volcano's contract (batch.volcano.sh/v1alpha1 Job): what its job plugins give each pod, written from
volcano-sh/volcano pkg/controllers/job/plugins:

- env (env/env.go): VK_TASK_INDEX and VC_TASK_INDEX, the pod's index in its task;
- svc (svc/svc.go, svc/const.go): hostname `<job>-<task>-<i>` and subdomain `<job>` (a headless Service of the
  job's name), VC_<TASK>_HOSTS and VC_<TASK>_NUM for every task, and the same in files under /etc/volcano
  (`<task>.host`, one host a line, and a file per variable), the task's `-` written `_`;
- pytorch (distributed-framework/pytorch): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK for its master and
  worker tasks (`--master`, `--worker`, `--port`, defaults master, worker, 23456);
- tensorflow (distributed-framework/tensorflow): TF_CONFIG (`--ps`, `--worker`, `--chief`, `--evaluator`,
  `--port` 2222), none for a job of one pod;
- mpi (distributed-framework/mpi): MPI_HOST, the worker task's hosts, on the master task.

The job webhook adds svc to a job with the pytorch, tensorflow or mpi plugin (and ssh to an mpi one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ...jobspec.controller import Controller
from ..common import RoleWiring
from ..values import Idx, Value
from .base import Contract, ContractContext, Row, role_wiring, service_names

API_VERSION = "batch.volcano.sh/v1alpha1"
VOLCANO_DIR = "/etc/volcano"
PYTORCH_PORT = 23456
TF_PORT = 2222
_NEEDS_SVC = ("pytorch", "tensorflow", "mpi")


def options(args: Sequence[str] | None, defaults: Mapping[str, str]) -> dict[str, str]:
    """A plugin's arguments (`--master=leader`, `--port 23457`) over its defaults, as Go's flag package reads
    them (one or two dashes, `=` or the next word)."""
    out = dict(defaults)
    words = list(args or [])
    i = 0
    while i < len(words):
        word = str(words[i])
        key, eq, value = word.lstrip("-").partition("=")
        if word.startswith("-") and key in out:
            if not eq and i + 1 < len(words):
                value = str(words[i + 1])
                i += 1
            out[key] = value
        i += 1
    return out


def plugins(controller: Controller) -> dict[str, list[str]]:
    """The job's plugins as its controller runs them: svc added where a framework plugin needs it."""
    found = {name: [str(a) for a in args] for name, args in (controller.plugins or {}).items()}
    if any(name in found for name in _NEEDS_SVC):
        found.setdefault("svc", [])
    return found


def _key(task: str) -> str:
    return task.replace("-", "_")


def _host(cctx: ContractContext, role: str, index: int) -> str:
    return cctx.host(role, index)


def wire_volcano(cctx: ContractContext) -> RoleWiring:
    used = plugins(cctx.controller)
    task = cctx.source_name()
    env: dict[str, Value] = {}
    paths: dict[str, str] = {}
    names: dict[str, int] = {}
    if "env" in used:
        env["VK_TASK_INDEX"] = (Idx(),)
        env["VC_TASK_INDEX"] = (Idx(),)
    if "svc" in used:
        for role in cctx.roles:
            key = _key(cctx.source_name(role))
            hosts = cctx.hosts(role)
            env[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
            env[f"VC_{key.upper()}_NUM"] = str(len(hosts))
            paths[f"{VOLCANO_DIR}/{key}.host"] = "\n".join(hosts)
            paths[f"{VOLCANO_DIR}/VC_{key.upper()}_HOSTS"] = ",".join(hosts)
            paths[f"{VOLCANO_DIR}/VC_{key.upper()}_NUM"] = str(len(hosts))
        for i in range(cctx.replicas()):
            for form in service_names(f"{cctx.name}-{task}-{i}.{cctx.name}", cctx.namespace):
                names[form] = i
    if "pytorch" in used:
        env.update(_pytorch(cctx, used["pytorch"]))
    if "tensorflow" in used:
        env.update(_tensorflow(cctx, used["tensorflow"]))
    hosting = False
    if "mpi" in used:
        env.update(_mpi(cctx, used["mpi"]))
        # Locally every worker is this machine: the master's mpirun starts the ranks here, without the
        # workers' sshd (which has nothing to serve).
        worker = options(used["mpi"], {"master": "master", "worker": "worker", "port": "22"})["worker"]
        hosting = task == worker and not cctx.ctx.topology.uniform
    return role_wiring(cctx, env, paths=paths, pod_name=(f"{cctx.name}-{task}-", Idx()), names=names,
                       hosting=hosting)


def _pytorch(cctx: ContractContext, args: list[str]) -> dict[str, Value]:
    opts = options(args, {"master": "master", "worker": "worker", "port": str(PYTORCH_PORT)})
    master, worker = cctx.role_of(opts["master"]), cctx.role_of(opts["worker"])
    if master is None:
        return {}  # the plugin gives nothing to a job without its master task
    env: dict[str, Value] = {
        "MASTER_ADDR": _host(cctx, master, 0),
        "MASTER_PORT": str(cctx.port(master)),
        "WORLD_SIZE": str(cctx.replicas(master) + (cctx.replicas(worker) if worker is not None else 0)),
    }
    if cctx.role == worker:
        env["RANK"] = (Idx(1, 1),)
    elif cctx.role == master:
        env["RANK"] = "0"
    return env


_TF_TYPES = ("ps", "worker", "chief", "evaluator")


def _tensorflow(cctx: ContractContext, args: list[str]) -> dict[str, Value]:
    opts = options(args, {**{t: t for t in _TF_TYPES}, "port": str(TF_PORT)})
    if len(cctx.roles) == 1 and cctx.replicas() == 1:
        return {}  # a stand-alone job: no TF_CONFIG
    cluster: dict[str, list[str]] = {}
    for kind in _TF_TYPES:  # the plugin's struct order, empty lists left out
        role = cctx.role_of(opts[kind])
        if role is not None and cctx.replicas(role):
            cluster[kind] = [cctx.address(role, i) for i in range(cctx.replicas(role))]
    task = cctx.source_name()
    kind = next((k for k in _TF_TYPES if opts[k] == task), task)
    text = json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}}, separators=(",", ":"))
    head, _, tail = text.partition('"index":0')
    return {"TF_CONFIG": (head + '"index":', Idx(), tail)}


def _mpi(cctx: ContractContext, args: list[str]) -> dict[str, Value]:
    opts = options(args, {"master": "master", "worker": "worker", "port": "22"})
    worker = cctx.role_of(opts["worker"])
    if cctx.source_name() != opts["master"] or worker is None:
        return {}
    return {"MPI_HOST": ",".join(cctx.hosts(worker))}


def default_port(controller: Controller, task: str) -> int:
    used = plugins(controller)
    if "tensorflow" in used:
        return int(options(used["tensorflow"], {"port": str(TF_PORT)})["port"])
    if "pytorch" in used:
        return int(options(used["pytorch"], {"port": str(PYTORCH_PORT)})["port"])
    return PYTORCH_PORT


_SAMPLE = {
    "apiVersion": API_VERSION,
    "kind": "Job",
    "metadata": {"name": "vc"},
    "spec": {
        "schedulerName": "volcano",
        "plugins": {"env": [], "svc": [], "pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
        "tasks": [
            {"name": "master", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "master", "image": "trainer:1", "command": ["python", "train.py"]}]}}},
            {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                {"name": "worker", "image": "trainer:1", "command": ["python", "train.py"]}]}}},
        ],
    },
}
_TF_SAMPLE = {
    "apiVersion": API_VERSION,
    "kind": "Job",
    "metadata": {"name": "vct"},
    "spec": {
        "plugins": {"tensorflow": ["--ps=ps", "--worker=worker"]},
        "tasks": [
            {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "ps", "image": "tf:2", "command": ["python", "train.py"]}]}}},
            {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                {"name": "worker", "image": "tf:2", "command": ["python", "train.py"]}]}}},
        ],
    },
}
_TF_CLUSTER = '{"cluster":{"ps":["{addr:ps-0}"],"worker":["{addr:worker-0}","{addr:worker-1}"]},'

VOLCANO_JOB = Contract(
    API_VERSION,
    "Job",
    "Volcano's job controller and its plugins",
    "volcano-sh/volcano pkg/controllers/job/plugins: env/env.go, svc/svc.go GenerateHosts, "
    "distributed-framework/pytorch, tensorflow, mpi",
    wire_volcano,
    default_port,
    (
        Row("command", "the container's command and args", "every replica", "run as written, once per pod"),
        Row("env", "VK_TASK_INDEX", "env plugin", "the pod's index in its task",
            example={"master-0": "0", "worker-0": "0", "worker-1": "1"}),
        Row("env", "VC_TASK_INDEX", "env plugin", "as VK_TASK_INDEX",
            example={"master-0": "0", "worker-1": "1"}),
        Row("env", "VC_<TASK>_HOSTS", "svc plugin, every task", "the task's `<job>-<task>-<i>.<job>`, joined by "
            "commas (`-` in the task's name written `_`, upper case)", "the replicas' addresses",
            example={"*": "{host:worker-0},{host:worker-1}"}, concrete="VC_WORKER_HOSTS"),
        Row("env", "VC_<TASK>_NUM", "svc plugin, every task", "the task's replicas", example={"*": "2"},
            concrete="VC_WORKER_NUM"),
        Row("file", "/etc/volcano/<task>.host", "svc plugin, every task", "the task's hosts, one a line",
            "$KUBETRAIN_FILES_ROOT/etc/volcano/<task>.host; a command naming /etc/volcano/ is refused",
            example={"*": "{host:worker-0}\n{host:worker-1}"}, concrete="/etc/volcano/worker.host"),
        Row("file", "/etc/volcano/VC_<TASK>_HOSTS", "svc plugin, every task", "as the variable",
            "under $KUBETRAIN_FILES_ROOT", example={"*": "{host:worker-0},{host:worker-1}"},
            concrete="/etc/volcano/VC_WORKER_HOSTS"),
        Row("file", "/etc/volcano/VC_<TASK>_NUM", "svc plugin, every task", "as the variable",
            "under $KUBETRAIN_FILES_ROOT", example={"*": "2"}, concrete="/etc/volcano/VC_WORKER_NUM"),
        Row("host", "<job>-<task>-<i>.<job>", "svc plugin, each replica", "the pod's hostname in the job's "
            "subdomain (and its namespace forms)", "127.0.0.1 in env values; warned in commands",
            example={"worker-1": "vc-worker-1.vc"}),
        Row("env", "MASTER_ADDR", "pytorch plugin", "`<job>-<master>-0.<job>`", "the master's address",
            example={"*": "{host:master-0}"}),
        Row("env", "MASTER_PORT", "pytorch plugin", "--port (default 23456)", "the master's own port",
            example={"*": "{port:master-0}"}),
        Row("env", "WORLD_SIZE", "pytorch plugin", "the master and worker tasks' replicas", example={"*": "3"}),
        Row("env", "RANK", "pytorch plugin: master and worker tasks", "master 0, worker i: i + 1",
            example={"master-0": "0", "worker-0": "1", "worker-1": "2"}),
        Row("env", "TF_CONFIG", "tensorflow plugin, a job of more than one pod", '`{"cluster":{"ps":[...],'
            '"worker":[...],"chief":[...],"evaluator":[...]},"task":{"type":...,"index":...}}`: each task\'s '
            "`<host>.<job>:<port>`, empty ones left out, no environment", "each replica's own address and port",
            example={"ps-0": _TF_CLUSTER + '"task":{"type":"ps","index":0}}',
                     "worker-1": _TF_CLUSTER + '"task":{"type":"worker","index":1}}'}, sample="tensorflow"),
        Row("env", "MPI_HOST", "mpi plugin: the master task", "the worker task's hosts, joined by commas",
            "their addresses"),
    ),
    {"main": _SAMPLE, "tensorflow": _TF_SAMPLE},
    native_flavor="volcano",
    notes=(
        "The ssh plugin's keys (/root/.ssh) are not given locally: mpirun reaches local ranks without ssh.",
        "Locally every task's host list names this machine once per replica; ports a script appends itself "
        "(`:2222`) are the same for every replica there.",
    ),
)

CONTRACTS: tuple[Contract, ...] = (VOLCANO_JOB,)

__all__ = ["CONTRACTS", "VOLCANO_DIR", "VOLCANO_JOB", "options", "plugins"]
