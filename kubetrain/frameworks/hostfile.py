"""Hostfiles in the syntax OpenMPI and DeepSpeed share: `host slots=N`, one line per worker replica."""

from __future__ import annotations

from .common import WireContext

HOSTFILE = "hostfile"


def hostfile(ctx: WireContext, role: str = "worker") -> str:
    """Lines in replica order. Several local replicas share 127.0.0.1: one line with their slots summed,
    since both launchers take a repeated host as an error or as one host."""
    slots: dict[str, int] = {}
    for i in range(ctx.topology.roles[role]):
        host = ctx.topology.host(role, i)
        host = "localhost" if host == "127.0.0.1" else host  # so mpirun starts local ranks without ssh
        slots[host] = slots.get(host, 0) + ctx.procs
    return "".join(f"{host} slots={n}\n" for host, n in slots.items())


def hostfile_path(ctx: WireContext) -> str:
    return f"{ctx.files_dir}/{HOSTFILE}"
