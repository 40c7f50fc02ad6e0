"""Hostfiles in the syntax OpenMPI and DeepSpeed share: `host slots=N`, one line per worker replica."""

from __future__ import annotations

from .common import WireContext

HOSTFILE = "hostfile"
NODEFILE = "nodefile"
"""A hostfile with a line per node, for a launcher started once per node (written only where the
hostfile itself has fewer lines: locally)."""


def hostfile(ctx: WireContext, role: str = "worker") -> str:
    """Lines in replica order. Several local replicas share 127.0.0.1: one line with their slots summed,
    since both launchers take a repeated host as an error or as one host."""
    slots: dict[str, int] = {}
    for i in range(ctx.topology.roles[role]):
        host = ctx.topology.host(role, i)
        host = "localhost" if host == "127.0.0.1" else host  # so mpirun starts local ranks without ssh
        slots[host] = slots.get(host, 0) + ctx.procs_of(role)
    return "".join(f"{host} slots={n}\n" for host, n in slots.items())


def nodefile(ctx: WireContext, role: str = "worker") -> str:
    """One line per replica of `role`, in node-rank order, each under a name of its own: what a launcher
    started once per node with its node rank reads (`deepspeed --no_ssh --node_rank=N`: the line count is
    the node count, line N the node's slots). Replicas with hosts of their own (on Kubernetes) are named by
    host, as in `hostfile`; replicas sharing one (locally, 127.0.0.1) by replica (`worker-1`): the names
    only label the nodes, nothing connects to them."""
    n = ctx.topology.roles[role]
    hosts = [ctx.topology.host(role, i) for i in range(n)]
    if len(set(hosts)) < n:
        hosts = [f"{role}-{i}" for i in range(n)]
    return "".join(f"{host} slots={ctx.procs_of(role)}\n" for host in hosts)


def hostfile_path(ctx: WireContext, name: str = HOSTFILE) -> str:
    return f"{ctx.files_dir}/{name}"
