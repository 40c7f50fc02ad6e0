"""tensorflow: TF_CONFIG with the cluster (chief, worker, ps; evaluator outside it) and this task."""

from __future__ import annotations

from ..contract.frameworks import Framework, record_of
from .common import RoleWiring, WireContext, program_argv, run_of, single
from .values import Addrs, Idx, Value


def tf_config(ctx: WireContext) -> Value:
    pieces: list[str | Idx | Addrs] = ['{"cluster":{']
    # The record's cluster roles (the evaluator stays out), which the resolver reads back inside the replica.
    members = record_of(Framework.TENSORFLOW).in_cluster(ctx.topology.roles)
    for i, role in enumerate(members):
        pieces += [f'"{role}":', Addrs(role)]
        if i < len(members) - 1:
            pieces.append(",")
    pieces += ['},"task":{"type":"', ctx.role, '","index":', Idx(), "}}"]
    merged: list[str | Idx | Addrs] = []
    for piece in pieces:  # join adjacent text so the value stays short and readable
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return tuple(merged)


def wire(ctx: WireContext) -> RoleWiring:
    return single(ctx, {"TF_CONFIG": tf_config(ctx)}, program_argv(run_of(ctx)), port=ctx.topology.port(ctx.role, 0))

