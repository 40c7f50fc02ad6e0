"""deepspeed: a node per worker replica, started by node rank; no ssh on any backend.

Without a `launcher` role every worker replica starts its own processes with the torch env contract that
`deepspeed.init_distributed()` reads (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK), as pytorch
does: kubetrain starts each process locally, and a pod runs its one process on Kubernetes. Where a pod runs
several (procsPerReplica > 1 on Kubernetes), it runs the deepspeed launcher for its own node,
`deepspeed --no_ssh --node_rank=$NODE_RANK`, which starts them with that contract and passes `--local_rank`
as kubetrain does locally (or not: `localRank: false` → `--no_local_rank`). Elastic jobs run torchrun's
elastic agent (pytorch's wiring).

With a `launcher` role (DeepSpeedJob's launcher), the launcher replica runs the deepspeed launcher once per
worker node, `deepspeed --no_ssh --node_rank=N`, instead of over ssh: that needs every node on the
launcher's host, as locally. Where the workers are other hosts (Kubernetes pods) reaching them would take
ssh (an sshd, keys, capabilities the pods drop), so the launcher role is refused there, pointing to the
form without it. A launcher that names its own `customCommand` runs that instead (the user's own launch).

No rank is started by a launcher that cleans the environment (`--no_ssh` passes the launcher's own to its
ranks), so no `.deepspeed_env` is needed: the job's env reaches every rank.
"""

from __future__ import annotations

from dataclasses import replace

from ..contract import env_names
from ..jobspec import FieldError, Run, SpecError
from . import pytorch
from .common import ProcessWiring, RoleWiring, WireContext, common_env, program_argv, run_of
from .hostfile import HOSTFILE, NODEFILE, hostfile, hostfile_path, nodefile
from .values import Idx, Value, resolve

LAUNCHER = "launcher"
WORKER = "worker"

NODE_LAUNCH = 'exec deepspeed --node_rank="$NODE_RANK" "$@"'
"""A pod's own node launch: the node rank is the replica's (NODE_RANK), argv is the same for every pod."""


def wire(ctx: WireContext) -> RoleWiring:
    if WORKER not in ctx.topology.roles:
        raise SpecError([FieldError(("spec", "roles"), "a DeepSpeed job needs a worker role: its replicas are the "
                                    "nodes", hint="roles: {launcher: {}, worker: {replicas: 2}}")])
    files = {HOSTFILE: hostfile(ctx)}
    if LAUNCHER in ctx.topology.roles:
        if ctx.spec.elastic is not None:
            raise SpecError([FieldError(("spec", "roles", LAUNCHER), "an elastic DeepSpeed job takes no launcher "
                                        "role: each worker runs torchrun's elastic agent for its own node",
                                        hint="drop the launcher role")])
        worker = _worker_ctx(ctx)
        if ctx.role == LAUNCHER:
            return _launcher(ctx, worker, files)
        # Workers host the processes the launcher starts for their node.
        wiring = pytorch.wire(worker)
        return RoleWiring(ctx.role, wiring.replicas, _worker_env(ctx, wiring), (), files=files, port=wiring.port)
    wiring = pytorch.wire(ctx)
    env = {**wiring.env, env_names.HOSTFILE: hostfile_path(ctx)}
    if ctx.spec.elastic is None:
        env.update(launcher_env(ctx))
    processes = wiring.processes
    launcher_args = bool(run_of(ctx).other_args)
    if ctx.spec.elastic is None and (launcher_args or (ctx.procs > 1 and not ctx.launcher_procs)):
        # One program per pod: the deepspeed launcher for this replica's node. Also with one slot per worker
        # when the job gives the launcher arguments (otherArgs, "command line args for the deepspeed job"):
        # without the launcher they would reach the Python interpreter, which refuses them.
        args = _launcher_args(ctx, run_of(ctx), _nodefile(ctx, files), *_rank0(ctx))
        processes = (ProcessWiring(("/bin/sh", "-c", NODE_LAUNCH, "deepspeed", *args)),)
    return RoleWiring(ctx.role, wiring.replicas, env, processes, files=files, port=wiring.port)


def _launcher(ctx: WireContext, worker: WireContext, files: dict[str, str]) -> RoleWiring:
    run = run_of(ctx)
    env = {**common_env(ctx), env_names.HOSTFILE: hostfile_path(ctx)}
    if run.custom_command is not None:  # the user's own launch line replaces the deepspeed launcher
        return RoleWiring(ctx.role, 1, env, (ProcessWiring(tuple(program_argv(run))),), files=files)
    nodes = ctx.topology.roles[WORKER]
    here = ctx.topology.host(LAUNCHER, 0)
    away = next((host for i in range(nodes) if (host := ctx.topology.host(WORKER, i)) != here), None)
    if away is not None:
        raise SpecError([FieldError(
            ("spec", "roles", LAUNCHER),
            "a DeepSpeed launcher role starts the workers' processes from the launcher replica, and on another "
            f"host ({away}) that takes ssh, which kubetrain's pods do not serve (no sshd or keys, every "
            "capability dropped)",
            hint="drop the launcher role: every worker then starts its own node's processes (the deepspeed "
                 "launcher with --no_ssh --node_rank when procsPerReplica > 1), with the same ranks and env")])
    args = _launcher_args(ctx, run, _nodefile(worker, files), *_rank0(worker))
    # The ranks of node N get what worker N's would without a launcher (KUBETRAIN_ROLE, NODE_RANK, ...);
    # the deepspeed launcher adds RANK, LOCAL_RANK and the rest of torch's contract.
    node_env = _worker_env(ctx, pytorch.wire(worker))
    processes = tuple(
        ProcessWiring(
            ("deepspeed", f"--node_rank={n}", *args),
            {name: resolve(value, n, worker.topology) for name, value in node_env.items()},
            local_rank=n,
        )
        for n in range(nodes)
    )
    return RoleWiring(ctx.role, 1, env, processes, files=files)


def launcher_env(ctx: WireContext) -> dict[str, Value]:
    """What the deepspeed launcher gives each process of a node beside torch's variables (launch.py): the
    node's rank and count (CROSS_RANK, CROSS_SIZE) and its processes (LOCAL_SIZE)."""
    return {
        "CROSS_RANK": (Idx(1, ctx.role_offset()),),
        "CROSS_SIZE": str(sum(ctx.topology.roles.values())),
        "LOCAL_SIZE": str(ctx.procs),
    }


def _worker_ctx(ctx: WireContext) -> WireContext:
    """The worker role as if it were the job's only one: the launcher replica is no node, so rank 0 is
    worker 0's first process and WORLD_SIZE counts the workers' processes only."""
    workers = replace(ctx.topology, roles={WORKER: ctx.topology.roles[WORKER]})
    procs = ctx.procs_of(WORKER)
    return replace(ctx, role=WORKER, topology=workers, procs=procs, role_procs={WORKER: procs})


def _worker_env(ctx: WireContext, wiring: RoleWiring) -> dict[str, Value]:
    """A worker's env (from `_worker_ctx`), with the whole job's cluster (the launcher too) and hostfile."""
    worker = _worker_ctx(ctx)
    return {**wiring.env, **launcher_env(worker), env_names.CLUSTER: ctx.topology.cluster_json(),
            env_names.HOSTFILE: hostfile_path(ctx)}


def _rank0(ctx: WireContext) -> tuple[str, int]:
    """Where rank 0 listens (MASTER_ADDR, MASTER_PORT): the first replica of the first role, as pytorch's."""
    first = next(iter(ctx.topology.roles))
    return ctx.topology.host(first, 0), ctx.topology.port(first, 0)


def _nodefile(ctx: WireContext, files: dict[str, str]) -> str:
    """The path of a hostfile with a line per worker node: the hostfile itself where it has one (pods),
    else a nodefile beside it (local replicas share one host line)."""
    nodes = nodefile(ctx, WORKER)
    if nodes == files[HOSTFILE]:
        return hostfile_path(ctx)
    files[NODEFILE] = nodes
    return hostfile_path(ctx, NODEFILE)


def _launcher_args(ctx: WireContext, run: Run, nodes: str, master: str, port: int) -> list[str]:
    """`deepspeed` options and program, all but the node rank (real options of deepspeed.launcher.runner;
    --no_ssh needs DeepSpeed ≥ 0.14.5). The hostfile says the nodes and slots: no --num_nodes/--num_gpus,
    which the launcher refuses beside an --include or --exclude in otherArgs."""
    args = ["--no_ssh", f"--hostfile={nodes}", f"--master_addr={master}", f"--master_port={port}"]
    if not ctx.spec.local_rank:
        args.append("--no_local_rank")
    return [*args, *run.other_args, *_program(run)]


def _program(run: Run) -> list[str]:
    """The program as the deepspeed launcher takes it: a script (run with the launcher's interpreter), a
    module (`--module`), or anything else as is (`--no_python`)."""
    if run.python is not None:
        return list(run.python)
    if run.module is not None:
        return ["--module", *run.module]
    return ["--no_python", *program_argv(run.model_copy(update={"other_args": []}))]

