"""mpi: a launcher replica runs `mpirun` over a hostfile of the worker replicas (Horovod, mpi4py).

Locally mpirun starts every rank on this machine itself, so worker replicas run nothing of their own.
On Kubernetes the workers wait for the launcher (the flavors that support MPI decide how).
"""

from __future__ import annotations

from ..contract import env_names
from ..jobspec import Framework
from .common import (
    FrameworkSupport,
    KubeflowKind,
    ProcessWiring,
    RoleWiring,
    WireContext,
    common_env,
    program_argv,
    run_of,
)
from .hostfile import HOSTFILE, hostfile, hostfile_path

LAUNCHER = "launcher"


def wire(ctx: WireContext) -> RoleWiring:
    hosts = hostfile(ctx)
    env = {**common_env(ctx), env_names.HOSTFILE: hostfile_path(ctx)}
    if ctx.role != LAUNCHER:
        return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], env, (), files={HOSTFILE: hosts})
    run = run_of(ctx)
    ranks = ctx.topology.roles["worker"] * ctx.procs
    program = program_argv(run.model_copy(update={"other_args": []}))
    argv = ["mpirun", "--hostfile", hostfile_path(ctx), "-np", str(ranks), *run.other_args, *program]
    if run.custom_command is not None:
        argv = program  # the user's own launch line replaces mpirun
    env.update(
        {
            # mpirun refuses root unless told twice; containers often run as root.
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            # The kernel's cross-memory attach is blocked in many containers; shared memory without it works.
            "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        }
    )
    return RoleWiring(ctx.role, 1, env, (ProcessWiring(tuple(argv)),), files={HOSTFILE: hosts})


SUPPORT = FrameworkSupport(Framework.MPI, wire, default_port=2222, implied_roles={LAUNCHER: 1},
                           kubeflow=KubeflowKind("MPIJob", "mpiReplicaSpecs", "mpi", "mpijob-port"),
                           program_role=LAUNCHER)
