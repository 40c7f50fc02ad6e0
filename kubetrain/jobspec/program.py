"""What a replica runs: its program (Run) and the ports it serves (Port)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..contract.naming import is_dns_label
from .errors import FieldError, SpecError
from .types import Arg, SpecModel, WholeNumber


class Run(SpecModel):
    """What each replica runs: exactly one of python, module, exec, customCommand (DeepSpeedJob's RunType), or
    entrypoint (the image's own ENTRYPOINT, on Kubernetes)."""

    python: list[Arg] | None = None
    """A script and its arguments: [train.py, --epochs, "3"]."""
    module: list[Arg] | None = None
    """A module run with `python -m` and its arguments: [my_pkg.train, --lr, "0.1"]."""
    exec: list[Arg] | None = None
    """A program and its arguments: [./train, --fast]."""
    custom_command: str | list[Arg] | None = None
    """Your own launch command, used as is instead of the framework's launcher. A string runs through
    `/bin/sh -c` (it is yours, so it is not quoted); a list runs directly. Env contract still applies."""
    entrypoint: list[Arg] | None = None
    """The image's own ENTRYPOINT runs, with these arguments (a container with args and no command; [] for
    neither): what a foreign file's container without a command means. The program is in the image, not in the
    job, so it runs on Kubernetes only (a local run is refused, naming the image: give the command instead),
    and kubetrain's start-up script cannot run before it: variables that depend on the replica's index are
    given only where the engine or the downward API can give them."""
    other_args: list[Arg] = Field(default_factory=list)
    """Extra arguments for the framework's launcher (torchrun, deepspeed, mpirun), before the program."""
    expand_env: bool = False
    """true: `$(NAME)` in the program's arguments (python, module, exec, a customCommand list, otherArgs) is the
    replica's variable NAME, by Kubernetes' rule for a container's args: `$$` is a `$`, a name the replica does
    not have stays as written. Each replica gets its own: `--out=/ckpt/$(KUBETRAIN_REPLICA_INDEX)`. Off: the
    arguments reach the program exactly as written (a customCommand string is a shell's and never expanded).
    A TorchX AppDef converts with it on, its macros written as references."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Run:
        forms = ("python", "module", "exec", "custom_command", "entrypoint")
        given = [name for name in forms if getattr(self, name) is not None]
        if len(given) != 1:
            camel = {"custom_command": "customCommand"}
            shown = [camel.get(g, g) for g in given]
            message = "set exactly one of python, module, exec, customCommand, entrypoint"
            message += f" (got {', '.join(shown)})" if given else ""
            raise SpecError([FieldError((), message, hint="e.g. run: {python: [train.py, --steps, '20']}")])
        for name in ("python", "module", "exec"):
            value = getattr(self, name)
            if value is not None and not value:
                raise SpecError(
                    [FieldError((name,), "must name at least the program", hint=f"{name}: [program, args...]")]
                )
        if self.custom_command is not None and not self.custom_command:
            raise SpecError([FieldError(("customCommand",), "must not be empty")])
        return self


class Port(SpecModel):
    """A container port, optionally exposed through a Service (Run:ai's ports)."""

    container: WholeNumber = Field(ge=1, le=65535)
    external: WholeNumber | None = Field(default=None, ge=1, le=65535)
    """Port on the Service; defaults to the container port. With serviceType NodePort, the port opened on every
    node (the Service's nodePort; the cluster's range, 30000–32767 by default), the Service answering on the
    container port inside the cluster; not given, Kubernetes picks one."""
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    name: str | None = None
    """Port name (≤ 15 characters, lowercase alphanumerics and '-')."""
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not is_dns_label(value, max_len=15):
            raise ValueError("must be ≤ 15 lowercase alphanumerics or '-' (an IANA service name)")
        return value


__all__ = ["Port", "Run"]
