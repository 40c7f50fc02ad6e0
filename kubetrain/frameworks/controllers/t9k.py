"""T9k's DeepSpeedJob contract (batch.tensorstack.dev/v1beta1). T9k's API reference names no variable: its
controller starts `config.run` with the deepspeed launcher over the workers (slotsPerWorker processes each), so a
training process gets the launcher's contract — deepspeed/launcher/launch.py: MASTER_ADDR, MASTER_PORT,
WORLD_SIZE, CROSS_RANK (the node), CROSS_SIZE (the nodes), LOCAL_SIZE, and per process RANK and LOCAL_RANK
(`--local_rank` too where config.localRank asks). kubetrain's deepspeed framework gives exactly that, starting
each node's processes itself; an elastic job runs torchrun's elastic agent, whose variables are torch's.
"""

from __future__ import annotations

from dataclasses import replace

from ...contract.frameworks import Framework, record_of
from ...jobspec.controller import Controller
from .. import deepspeed
from ..common import RoleWiring
from .base import Contract, ContractContext, Row

API_VERSION = "batch.tensorstack.dev/v1beta1"


NOT_THE_LAUNCHERS = ("NODE_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "NPROC_PER_NODE", "PYTHONUNBUFFERED")
"""kubetrain's deepspeed framework variables that the deepspeed launcher does not set: left out."""


def wire_deepspeedjob(cctx: ContractContext) -> RoleWiring:
    wiring = deepspeed.wire(cctx.ctx)
    if any(p.argv[:3] == ("/bin/sh", "-c", deepspeed.NODE_LAUNCH) for p in wiring.processes):
        return wiring  # the node's deepspeed launcher starts the processes: it reads NODE_RANK, sets the rest
    env = {k: v for k, v in wiring.env.items() if k not in NOT_THE_LAUNCHERS}
    processes = tuple(replace(p, env={k: v for k, v in p.env.items() if k not in NOT_THE_LAUNCHERS})
                      for p in wiring.processes)
    return replace(wiring, env=env, processes=processes)


def default_port(_controller: Controller, _type: str) -> int:
    return record_of(Framework.DEEPSPEED).default_port


DEEPSPEEDJOB = Contract(
    API_VERSION,
    "DeepSpeedJob",
    "T9k's DeepSpeedJob controller",
    "T9k's DeepSpeedJob API reference (config.run started by the deepspeed launcher); microsoft/DeepSpeed "
    "deepspeed/launcher/launch.py",
    wire_deepspeedjob,
    default_port,
    (
        Row("command", "config.run (python, module, exec) and otherArgs", "every process", "started by the "
            "deepspeed launcher, slotsPerWorker processes per worker", "kubetrain starts each process itself, "
            "with the launcher's variables"),
        Row("env", "MASTER_ADDR", "every process", "worker 0", "its address", example={"*": "{host:worker-0}"}),
        Row("env", "MASTER_PORT", "every process", "the launcher's port", "worker 0's own port",
            example={"*": "{port:worker-0}"}),
        Row("env", "WORLD_SIZE", "every process", "workers × slotsPerWorker", example={"*": "4"}),
        Row("env", "RANK", "every process", "worker i, process l: i × slotsPerWorker + l",
            example={"worker-0.0": "0", "worker-0.1": "1", "worker-1.0": "2", "worker-1.1": "3"}),
        Row("env", "LOCAL_RANK", "every process", "its process number in the worker",
            example={"worker-0.0": "0", "worker-1.1": "1"}),
        Row("env", "LOCAL_SIZE", "every process", "slotsPerWorker", example={"*": "2"}),
        Row("env", "CROSS_RANK", "every process", "the worker's index (the node rank)",
            example={"worker-0.1": "0", "worker-1.0": "1"}),
        Row("env", "CROSS_SIZE", "every process", "the workers", example={"*": "2"}),
    ),
    {"main": {"apiVersion": API_VERSION, "kind": "DeepSpeedJob", "metadata": {"name": "ds"}, "spec": {
        "config": {"slotsPerWorker": 2, "run": {"python": ["train.py"]}},
        "worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "worker", "image": "ds:1"}]}}}}}},
    notes=("T9k's own host names are not in its reference: kubetrain's DeepSpeedJob names none.",),
)

CONTRACTS: tuple[Contract, ...] = (DEEPSPEEDJOB,)

__all__ = ["CONTRACTS", "DEEPSPEEDJOB"]
