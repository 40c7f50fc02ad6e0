"""tensorflow: TF_CONFIG with the cluster (chief, worker, ps; evaluator outside it) and this task."""

from __future__ import annotations

from .common import RoleWiring, WireContext, program_argv, run_of, single
from .values import Addrs, Idx, Value

CLUSTER_ROLES = ("chief", "worker", "ps")  # TensorFlow keeps the evaluator out of the cluster


def tf_config(ctx: WireContext) -> Value:
    pieces: list[str | Idx | Addrs] = ['{"cluster":{']
    members = [r for r in CLUSTER_ROLES if r in ctx.topology.roles]
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

