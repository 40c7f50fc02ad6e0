"""generic: the common variables, and procsPerReplica processes per replica, each told which it is.

As pytorch numbers a replica's processes with LOCAL_RANK and jax with JAX_LOCAL_PROCESS_ID, a generic
job's processes get `KUBETRAIN_LOCAL_RANK` (0 … procsPerReplica-1) and `KUBETRAIN_PROCS_PER_REPLICA`;
a process's number in the role is then `KUBETRAIN_REPLICA_INDEX × KUBETRAIN_PROCS_PER_REPLICA +
KUBETRAIN_LOCAL_RANK`. `KUBETRAIN_RANK0_HOST` is the first replica's host (of the first role), where a
coordinator usually listens. Locally kubetrain starts each process itself; on Kubernetes a pod runs one program,
so more than one process per replica is refused there.
"""

from __future__ import annotations

from ..contract import env_names
from .common import ProcessWiring, RoleWiring, WireContext, common_env, program_argv, run_of

LOCAL_RANK = env_names.LOCAL_RANK
PROCS_PER_REPLICA = env_names.PROCS_PER_REPLICA
RANK0_HOST = env_names.RANK0_HOST


def wire(ctx: WireContext) -> RoleWiring:
    run = run_of(ctx)
    processes = tuple(
        ProcessWiring(
            tuple(program_argv(run, local_rank_arg=f"--local_rank={local}" if ctx.spec.local_rank else None)),
            {LOCAL_RANK: str(local)},
            local_rank=local,
        )
        for local in range(ctx.procs)
    )
    first = next(iter(ctx.topology.roles))
    env = {**common_env(ctx), PROCS_PER_REPLICA: str(ctx.procs), RANK0_HOST: ctx.topology.host(first, 0)}
    return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], env, processes)

