"""What each framework accepts as roles. Pure data: the wiring itself lives in kubetrain.frameworks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Framework(StrEnum):
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    DEEPSPEED = "deepspeed"
    MPI = "mpi"
    JAX = "jax"
    GENERIC = "generic"


# Roles each framework knows, in the order replicas are numbered and shown. `None`: any DNS-1123 name.
ROLES: dict[Framework, tuple[str, ...] | None] = {
    Framework.PYTORCH: ("master", "worker"),
    Framework.TENSORFLOW: ("chief", "worker", "ps", "evaluator"),
    Framework.DEEPSPEED: ("launcher", "worker"),
    Framework.MPI: ("launcher", "worker"),
    Framework.JAX: ("worker",),
    Framework.GENERIC: None,
}

# Roles that exist at most once (a coordinator, not a pool).
SINGLE_REPLICA_ROLES: dict[Framework, tuple[str, ...]] = {
    Framework.PYTORCH: ("master",),
    Framework.TENSORFLOW: ("chief", "evaluator"),
    Framework.DEEPSPEED: ("launcher",),
    Framework.MPI: ("launcher",),
}

ELASTIC_FRAMEWORKS = (Framework.PYTORCH, Framework.DEEPSPEED)
MPI_FRAMEWORKS = (Framework.MPI,)
"""Frameworks whose jobs may carry `spec.mpi` (an MPIJob's settings)."""
TRIALS_FRAMEWORKS = (Framework.GENERIC,)
"""Frameworks whose job may be trials (independent runs): the others wire replicas into one distributed job."""


@dataclass(frozen=True)
class RoleRule:
    """A role a framework cannot run without: one of `needs_one_of` must be there (when `when` is)."""

    needs_one_of: tuple[str, ...]
    message: str
    when: str | None = None
    """Only when this role is present (TensorFlow's parameter servers need someone to serve)."""
    hint: str | None = None


ROLE_RULES: dict[Framework, tuple[RoleRule, ...]] = {
    Framework.PYTORCH: (RoleRule(("master", "worker"), "a PyTorch job needs a master or worker role"),),
    Framework.TENSORFLOW: (
        RoleRule(("worker", "chief"), "parameter servers need a worker or chief role to serve", when="ps"),
    ),
    Framework.MPI: (RoleRule(("worker",), "an MPI job needs a worker role", hint="roles: {worker: {replicas: 2}}"),),
}
