"""mpi: a launcher replica runs `mpirun` over a hostfile of the worker replicas (Horovod, mpi4py).

Locally mpirun starts every rank on this machine itself, so worker replicas run nothing of their own (a
worker's own `run`, such as the `sshd -De` of an MPIJob, is for Kubernetes). On Kubernetes the workers are
other pods, which mpirun reaches over ssh (the flavors decide who provides sshd and its keys:
docs/render.md, "MPI over ssh"). A rank started there does not inherit the launcher's environment as a
local one does: mpirun forwards it (`-x NAME` for every variable the launcher is known to have), so a rank
sees the same variables on every backend.
"""

from __future__ import annotations

from ..contract import env_names
from .common import (
    ProcessWiring,
    RoleWiring,
    WireContext,
    common_env,
    program_argv,
    run_of,
)
from .hostfile import HOSTFILE, hostfile, hostfile_path
from .values import Value

LOCALHOST = "127.0.0.1"

LAUNCHER = "launcher"
SSHD = "/usr/sbin/sshd"
"""Where every distribution puts OpenSSH's server (it must be started by its absolute path)."""
SSHD_CONFIG = "sshd_config"


def sshd_argv(files_dir: str) -> tuple[str, ...]:
    """What kubetrain's MPI workers run on Kubernetes: sshd with kubetrain's config from the job's files
    (the flavors' manifests/mpi_ssh.py; a conversion tells it from a program of the user's own)."""
    return (SSHD, "-De", "-f", f"{files_dir}/{SSHD_CONFIG}")


def wire(ctx: WireContext) -> RoleWiring:
    hosts = hostfile(ctx)
    env = {**common_env(ctx), env_names.HOSTFILE: hostfile_path(ctx)}
    if ctx.role != LAUNCHER:
        return RoleWiring(ctx.role, ctx.topology.roles[ctx.role], env, (), files={HOSTFILE: hosts})
    run = run_of(ctx)
    ranks = ctx.topology.roles["worker"] * ctx.procs_of("worker")  # the workers' slots, not the launcher's
    program = program_argv(run.model_copy(update={"other_args": []}))
    env.update(
        {
            # mpirun refuses root unless told twice; containers often run as root.
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            # The kernel's cross-memory attach is blocked in many containers; shared memory without it works.
            "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        }
    )
    argv = ["mpirun", "--hostfile", hostfile_path(ctx), "-np", str(ranks)]
    if remote_workers(ctx):
        # Keep the hosts' names as written: Open MPI would otherwise shorten `job-worker-0.job` to a name that
        # does not resolve (the MPI Operator sets the same).
        env["OMPI_MCA_orte_keep_fqdn_hostnames"] = "true"
        for name in forwarded(ctx, env):
            argv += ["-x", name]
    argv += [*run.other_args, *program]
    if run.custom_command is not None:
        argv = program  # the user's own launch line replaces mpirun
    return RoleWiring(ctx.role, 1, env, (ProcessWiring(tuple(argv)),), files={HOSTFILE: hosts})


def remote_workers(ctx: WireContext) -> bool:
    """The workers are other hosts (pods), reached over ssh: not this machine (127.0.0.1)."""
    return any(ctx.topology.host("worker", i) != LOCALHOST for i in range(ctx.topology.roles["worker"]))


def forwarded(ctx: WireContext, env: dict[str, Value]) -> list[str]:
    """What a rank on another host must get from the launcher (`mpirun -x`), as a local rank inherits it:
    the framework's variables, the user's (env, the podTemplate's main container's) and PATH (an image's
    `python` may be on a PATH of its own). Open MPI forwards its own OMPI_* itself; envFrom's names are not
    known before the pod runs (the render says so)."""
    names = [*env, *(var.name for var in ctx.settings.env or []), "PATH"]
    return [name for name in dict.fromkeys(names) if not name.startswith("OMPI_")]

