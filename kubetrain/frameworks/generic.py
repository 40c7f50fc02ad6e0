"""generic: the common variables only; every replica runs the program as given."""

from __future__ import annotations

from ..jobspec import Framework
from .common import FrameworkSupport, RoleWiring, WireContext, program_argv, run_of, single


def wire(ctx: WireContext) -> RoleWiring:
    return single(ctx, {}, program_argv(run_of(ctx)))


SUPPORT = FrameworkSupport(Framework.GENERIC, wire, default_port=29500)
