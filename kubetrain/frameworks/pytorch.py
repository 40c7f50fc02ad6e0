"""pytorch: torch.distributed's env:// contract, or torchrun when elastic, one launcher per replica, or given
otherArgs (torchrun's options).

Ranks are numbered across roles in order (master first), procsPerReplica consecutive ranks per replica. A `run`
that already is torchrun (`exec: [torchrun, ...]`, `module: [torch.distributed.run, ...]`) runs as written, one
per replica, with its options as PET_* variables: never a torchrun inside kubetrain's.
"""

from __future__ import annotations

from ..jobspec import Run
from .common import (
    PYTHON,
    ProcessWiring,
    RoleWiring,
    WireContext,
    common_env,
    program_argv,
    run_of,
)
from .launchers import TORCHRUN, run_launcher
from .values import Idx, Value


def _rank0(ctx: WireContext) -> tuple[str, int]:
    first = next(iter(ctx.topology.roles))
    return ctx.topology.host(first, 0), ctx.topology.port(first, 0)


def wire(ctx: WireContext) -> RoleWiring:
    run = run_of(ctx)
    total_nodes = sum(ctx.topology.roles.values())
    world = ctx.world_size
    addr, port = _rank0(ctx)
    offset = ctx.role_offset()
    first_rank = ctx.rank_offset()
    env: dict[str, Value] = {
        **common_env(ctx),
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world),
        "NODE_RANK": (Idx(1, offset),),
        "GROUP_RANK": (Idx(1, offset),),
        "LOCAL_WORLD_SIZE": str(ctx.procs),
        "NPROC_PER_NODE": str(ctx.procs),
    }
    elastic = ctx.spec.elastic
    # otherArgs are torchrun's ("extra arguments for the framework's launcher"): given, each replica runs
    # torchrun with them, also where kubetrain would start the processes itself (they reached the interpreter).
    # A run that is torchrun itself runs as written, one per replica.
    if elastic is not None or (ctx.procs > 1 and not ctx.launcher_procs) or run.other_args \
            or run_launcher(run) == TORCHRUN:
        return _torchrun(ctx, env, addr, port, total_nodes)
    processes = []
    for local in range(ctx.procs):
        arg = f"--local_rank={local}" if ctx.spec.local_rank else None
        processes.append(
            ProcessWiring(
                tuple(program_argv(run, local_rank_arg=arg)),
                {"RANK": (Idx(ctx.procs, first_rank + local),), "LOCAL_RANK": str(local)},
                local_rank=local,
            )
        )
    return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], env, tuple(processes), port=port)


def _torchrun(ctx: WireContext, env: dict[str, Value], addr: str, port: int, total_nodes: int) -> RoleWiring:
    """One torchrun per replica. Its options come as PET_* variables, so argv stays the same for every
    replica (torchrun reads PET_<OPTION> for each option) and the node rank can vary by index."""
    run = run_of(ctx)
    elastic = ctx.spec.elastic
    env = dict(env)
    if elastic is not None:
        env["PET_NNODES"] = f"{elastic.min_replicas}:{elastic.max_replicas}"
        env["PET_MAX_RESTARTS"] = str(elastic.max_restarts)
        env["PET_RDZV_BACKEND"] = "c10d"
        env["PET_RDZV_ENDPOINT"] = f"{addr}:{port}"
        env["PET_RDZV_ID"] = ctx.job_name
        # A fresh TCP store per rendezvous round: torch otherwise reuses one whose stale addresses make
        # restarted ranks fail with "connectFullMesh failed".
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    else:
        env["PET_NNODES"] = str(total_nodes)
        env["PET_NODE_RANK"] = (Idx(1, ctx.role_offset()),)
        env["PET_MASTER_ADDR"] = addr
        env["PET_MASTER_PORT"] = str(port)
        env["PET_RDZV_BACKEND"] = "static"
    env["PET_NPROC_PER_NODE"] = str(ctx.procs)
    launcher = ["python", "-m", "torch.distributed.run", *run.other_args]
    if run_launcher(run) == TORCHRUN:
        argv = as_written(run)
    elif run.python is not None:
        argv = [*launcher, *run.python]
    elif run.module is not None:
        argv = [*launcher, "-m", *run.module]
    elif run.exec is not None:
        argv = [*launcher, "--no-python", *run.exec]
    else:
        argv = [*launcher, "--no-python", *program_argv(run)]
    return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], env, (ProcessWiring(tuple(argv)),), port=port)


def as_written(run: Run) -> list[str]:
    """A `run` that is torchrun itself, with otherArgs (the launcher's options) right after the launcher."""
    if run.module is not None:
        return [PYTHON, "-m", run.module[0], *run.other_args, *run.module[1:]]
    argv = list(run.exec or run.custom_command or [])
    at = argv.index("-m") + 2 if "-m" in argv[:3] and not argv[0].endswith("torchrun") else 1
    return [*argv[:at], *run.other_args, *argv[at:]]

