"""Volumes and mounts: TorchX-style strings (`type=bind,src=..,dst=..`) or objects, as in Run:ai workloads."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from .errors import FieldError, SpecError
from .types import Quantity, SpecModel, WholeNumber


class _MountBase(SpecModel):
    dst: str
    """Absolute path inside the container."""

    @model_validator(mode="after")
    def _absolute(self) -> _MountBase:
        if not self.dst.startswith("/"):
            raise SpecError([FieldError(("dst",), f"must be an absolute path (got {self.dst!r})")])
        return self


class BindMount(_MountBase):
    """A host directory (hostPath on Kubernetes; used as is by local processes)."""

    type: Literal["bind"] = "bind"
    src: str
    """Path on the host."""
    readonly: bool = False


class VolumeMount(_MountBase):
    """A PersistentVolumeClaim by name."""

    type: Literal["volume"] = "volume"
    src: str
    """Name of the PersistentVolumeClaim."""
    readonly: bool = False
    sub_path: str | None = None


class DeviceMount(SpecModel):
    """A host device such as /dev/fuse. Makes the pod privileged on Kubernetes: kubetrain warns when rendering."""

    type: Literal["device"] = "device"
    src: str
    """Device path on the host, e.g. /dev/fuse."""
    dst: str | None = None
    """Path inside the container; defaults to src."""
    perm: str = "rwm"
    """Device permissions: any of r, w, m."""

    @model_validator(mode="after")
    def _valid(self) -> DeviceMount:
        problems = []
        if not self.src.startswith("/dev/"):
            problems.append(FieldError(("src",), f"must be a device path under /dev (got {self.src!r})"))
        if not self.perm or set(self.perm) - set("rwm"):
            problems.append(FieldError(("perm",), f"must be made of r, w, m (got {self.perm!r})"))
        if problems:
            raise SpecError(problems)
        return self


class NfsMount(_MountBase):
    """An NFS export."""

    type: Literal["nfs"] = "nfs"
    server: str
    path: str
    """Exported path on the server."""
    readonly: bool = False


class EmptyDirMount(_MountBase):
    """Scratch space that lives as long as the pod."""

    type: Literal["emptyDir"] = "emptyDir"
    medium: Literal["", "Memory"] = ""
    size_limit: Quantity | None = None


class ConfigMapMount(_MountBase):
    type: Literal["configMap"] = "configMap"
    name: str
    """Name of the ConfigMap."""
    items: dict[str, str] = Field(default_factory=dict)
    """Only these keys, mapped to file names (key: path)."""
    default_mode: WholeNumber | None = Field(default=None, ge=0, le=0o777)


class SecretMount(_MountBase):
    type: Literal["secret"] = "secret"
    name: str
    """Name of the Secret (its values are never printed)."""
    items: dict[str, str] = Field(default_factory=dict)
    default_mode: WholeNumber | None = Field(default=None, ge=0, le=0o777)


class S3Mount(_MountBase):
    """An S3 bucket, mounted through a CSI driver on Kubernetes (Run:ai's s3 volume)."""

    type: Literal["s3"] = "s3"
    bucket: str
    prefix: str | None = None
    url: str | None = None
    """Endpoint URL for S3-compatible stores."""
    access_key_secret: str | None = None
    """Name of a Secret with the access key and secret key."""


class GitSyncMount(_MountBase):
    """A git repository kept in sync into a directory (git-sync), as in Run:ai's gitSync volume."""

    type: Literal["gitSync"] = "gitSync"
    repository: str
    branch: str | None = None
    revision: str | None = None
    username: str | None = None
    password_secret: str | None = None
    """Name of a Secret holding the password or token."""


Mount = Annotated[
    BindMount
    | VolumeMount
    | DeviceMount
    | NfsMount
    | EmptyDirMount
    | ConfigMapMount
    | SecretMount
    | S3Mount
    | GitSyncMount,
    Field(discriminator="type"),
]

MOUNT_TYPES = ("bind", "volume", "device", "nfs", "emptyDir", "configMap", "secret", "s3", "gitSync")
_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*(?:=(.*))?")
_ALIASES = {"source": "src", "destination": "dst", "target": "dst", "ro": "readonly"}


def parse_mount_string(text: str) -> dict[str, Any]:
    """`type=bind,src=/data,dst=/data,readonly` → a mount dict. TorchX's syntax, with a few aliases."""
    result: dict[str, Any] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        m = _PAIR.fullmatch(part)
        if m is None:
            raise SpecError.single((), f"cannot read {part!r} in mount {text!r}", hint="use key=value pairs")
        key, value = _ALIASES.get(m.group(1), m.group(1)), m.group(2)
        if value is None:
            if key != "readonly":
                raise SpecError.single((), f"{key!r} needs a value in mount {text!r}", hint=f"{key}=...")
            result["readonly"] = True
        else:
            result[key] = value.strip()
    if "type" not in result:
        raise SpecError.single(
            (), f"mount {text!r} has no type", hint=f"start with type=, one of {', '.join(MOUNT_TYPES)}"
        )
    if result["type"] not in MOUNT_TYPES:
        raise SpecError.single(
            ("type",), f"unknown mount type {result['type']!r}", hint=f"one of {', '.join(MOUNT_TYPES)}"
        )
    if "readonly" in result and isinstance(result["readonly"], str):
        result["readonly"] = result["readonly"].lower() in ("1", "true", "yes")
    return result


def _mount_input(value: Any) -> Any:
    return parse_mount_string(value) if isinstance(value, str) else value


class _MountOrString:
    """JSON Schema of a mount: an object, or the TorchX string form (editors must accept both)."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        torchx = {
            "type": "string",
            "pattern": r"^\s*type=",
            "description": "type=bind|volume|device,src=..,dst=..[,readonly]",
        }
        return {"anyOf": [torchx, handler(core_schema)]}


MountInput = Annotated[Mount, BeforeValidator(_mount_input), _MountOrString()]
"""A mount object, or a TorchX-style string such as `type=volume,src=datasets,dst=/data,readonly`."""
