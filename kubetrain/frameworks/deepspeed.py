"""deepspeed: per-node launch with node rank (the torch env contract DeepSpeed reads) and a hostfile;
with a `launcher` role, the deepspeed launcher runs there over the hostfile (DeepSpeedJob's launcher)."""

from __future__ import annotations

from ..contract import env_names
from ..jobspec import Framework
from . import pytorch
from .common import FrameworkSupport, ProcessWiring, RoleWiring, WireContext, common_env, program_argv, run_of
from .hostfile import HOSTFILE, hostfile, hostfile_path

LAUNCHER = "launcher"


def wire(ctx: WireContext) -> RoleWiring:
    hosts = hostfile(ctx)
    if ctx.role == LAUNCHER:
        return _launcher(ctx, hosts)
    wiring = pytorch.wire(ctx)
    env = {**wiring.env, env_names.HOSTFILE: hostfile_path(ctx)}
    if LAUNCHER in ctx.topology.roles:
        # The launcher starts the processes on the workers; the workers only host them.
        return RoleWiring(ctx.role, wiring.replicas, env, (), files={HOSTFILE: hosts}, port=wiring.port)
    return RoleWiring(ctx.role, wiring.replicas, env, wiring.processes, files={HOSTFILE: hosts}, port=wiring.port)


def _launcher(ctx: WireContext, hosts: str) -> RoleWiring:
    run = run_of(ctx)
    master = ctx.topology.host("worker", 0)
    master_port = ctx.topology.port("worker", 0)
    env = {**common_env(ctx), env_names.HOSTFILE: hostfile_path(ctx)}
    if run.custom_command is not None:
        argv = program_argv(run)
    else:
        program = program_argv(run.model_copy(update={"other_args": []}))
        if program[0] == "python":
            program = program[1:]  # the deepspeed launcher runs the script with its own interpreter
            if program[0] == "-m":
                program = ["--module", *program[1:]]
        else:
            program = ["--no_python", *program]
        argv = [
            "deepspeed",
            f"--hostfile={hostfile_path(ctx)}",
            f"--master_addr={master}",
            f"--master_port={master_port}",
            *run.other_args,
            *program,
        ]
    return RoleWiring(ctx.role, 1, env, (ProcessWiring(tuple(argv)),), files={HOSTFILE: hosts})


# DeepSpeed reads torch's env contract: the same port, and a PyTorchJob on the training operator.
SUPPORT = FrameworkSupport(Framework.DEEPSPEED, wire, pytorch.DEFAULT_PORT, kubeflow=pytorch.KUBEFLOW)
