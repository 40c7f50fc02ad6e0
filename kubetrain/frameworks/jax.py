"""jax: the coordinator (worker 0), the process count and this process's id, as jax.distributed reads them."""

from __future__ import annotations

from .common import (
    ProcessWiring,
    RoleWiring,
    WireContext,
    common_env,
    program_argv,
    run_of,
)
from .values import Idx


def wire(ctx: WireContext) -> RoleWiring:
    first = next(iter(ctx.topology.roles))
    coordinator = ctx.topology.address(first, 0)
    total = ctx.world_size
    offset = ctx.rank_offset()
    base = {**common_env(ctx), "JAX_COORDINATOR_ADDRESS": coordinator, "JAX_NUM_PROCESSES": str(total)}
    argv = tuple(program_argv(run_of(ctx)))
    processes = tuple(
        ProcessWiring(
            argv,
            {"JAX_PROCESS_ID": (Idx(ctx.procs, offset + local),), "JAX_LOCAL_PROCESS_ID": str(local)},
            local_rank=local,
        )
        for local in range(ctx.procs)
    )
    return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], base, processes, port=ctx.topology.port(first, 0))

