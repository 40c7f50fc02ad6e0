"""Compute resources of one replica, including GPU sharing (fractions, memory) and MIG."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator
from pydantic.alias_generators import to_camel

from .errors import FieldError, SpecError
from .types import Quantity, SpecModel, parse_quantity

_MIG_PROFILE = re.compile(r"\d+g\.\d+gb(\+me)?")
_HUGEPAGES = "hugepages-"
_FRACTIONAL_GPU_HINT = (
    "for a share of a GPU set resources.gpu below 1 (e.g. 0.5) with resources.gpuSharing (hami, runai or aliyun)"
)


# The API server's classification of resource names (k8s.io/kubernetes pkg/apis/core/helper): a name
# without a domain, or in kubernetes.io, is native; any other domain-prefixed name is an extended resource.
def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    return not is_native_resource(name) and not name.startswith("requests.")


def is_hugepages(name: str) -> bool:
    return name.startswith(_HUGEPAGES)


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit (cpu, memory); extended resources and huge pages need
    request = limit, and a limit whenever there is a request."""
    return is_native_resource(name) and not is_hugepages(name)


def _looks_like_gpu(name: str) -> bool:
    return "gpu" in name.lower() or name.startswith("nvidia.com/mig-")


def quantity_problem(name: str, quantity: str) -> FieldError | None:
    """What the API server refuses in one container resource quantity, as an error at path `(name,)`.

    Only rules about the value alone: extended resources are whole numbers, huge pages a whole number of
    pages. Rules between a request and its limit need the merged container and are checked by the renderer.
    """
    try:
        amount = parse_quantity(quantity)
    except (ValueError, ArithmeticError):
        return None  # not a quantity at all: the Quantity type says so
    if is_extended_resource(name):
        # ValidateResourceQuantityValue: the value in thousandths, rounded up, must be a multiple of 1000.
        if math.ceil(amount * 1000) % 1000 == 0:
            return None
        hint = "extended resources (a domain-prefixed name outside kubernetes.io) are counted in whole units"
        if _looks_like_gpu(name):
            hint += f"; {_FRACTIONAL_GPU_HINT}"
        return FieldError((name,), f"must be a whole number: {name} is an extended resource", quantity, True, hint)
    if is_hugepages(name):
        size_text = name[len(_HUGEPAGES):]
        try:
            size: Decimal | None = parse_quantity(size_text)
        except (ValueError, ArithmeticError):
            size = None
        if size is None or not size.is_finite() or size <= 0 or size != size.to_integral_value():
            hint = "name huge pages by their page size: hugepages-2Mi, hugepages-1Gi"
            return FieldError((name,), "is not a huge page size", hint=hint)
        if math.ceil(amount) % int(size) != 0:
            return FieldError(
                (name,),
                f"must be a whole number of {size_text} pages",
                quantity,
                True,
                hint=f"huge pages are allocated whole: use a multiple of {size_text}",
            )
    return None


def _resource_list(value: dict[str, str]) -> dict[str, str]:
    problems = [p for name, quantity in value.items() if (p := quantity_problem(name, quantity)) is not None]
    if problems:
        raise SpecError(problems)
    return value


ResourceList = Annotated[dict[str, Quantity], AfterValidator(_resource_list)]
"""Container resources by name ({"cpu": "500m", "nvidia.com/gpu": 1}), each quantity valid for its name."""


class GpuSharing(StrEnum):
    """GPU-sharing schedulers kubetrain can express fractional GPUs and GPU memory for."""

    HAMI = "hami"
    """HAMi (Project-HAMi): `nvidia.com/gpumem` and `nvidia.com/gpucores` resources."""
    RUNAI = "runai"
    """Run:ai scheduler: `gpu-fraction` / `gpu-memory` pod annotations, schedulerName runai-scheduler."""
    ALIYUN = "aliyun"
    """Alibaba Cloud gpushare: `aliyun.com/gpu-mem` resource (GiB)."""


class Resources(SpecModel):
    """What one replica asks for. Quantities use Kubernetes syntax ("500m", "16Gi")."""

    cpu: Quantity | None = None
    """CPU request (cores): 2, "500m"."""
    cpu_limit: Quantity | None = None
    """CPU limit; at least the request."""
    memory: Quantity | None = None
    """Memory request: "512Mi", "16Gi"."""
    memory_limit: Quantity | None = None
    """Memory limit; at least the request."""
    gpu: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Whole GPUs (1, 8), or a fraction 0 < g < 1 of one GPU (needs gpuSharing)."""
    gpu_memory: Quantity | None = None
    """GPU memory to reserve on a shared GPU ("8Gi"); needs gpuSharing."""
    gpu_limit: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Upper bound of GPUs (fractional with gpuSharing); defaults to the request."""
    gpu_sharing: GpuSharing | None = None
    """Scheduler that shares GPUs between pods: hami, runai or aliyun. Required for fractions and gpuMemory."""
    mig_profile: str | None = None
    """A MIG slice instead of a whole GPU, e.g. "1g.5gb", "3g.20gb" → nvidia.com/mig-<profile>."""
    extended_resources: ResourceList = Field(default_factory=dict)
    """Other resources, verbatim, as limits: {"rdma/hca": 1, "example.com/fpga": 2}. Extended resources are
    whole numbers; for a fraction of a GPU use gpu with gpuSharing."""
    shm: Quantity | bool | None = None
    """A large /dev/shm (memory-backed): a size ("16Gi"), or true for no size limit."""
    capabilities: dict[str, str] = Field(default_factory=dict)
    """Node capabilities, TorchX style: {"node.kubernetes.io/instance-type": "p4d.24xlarge"} → node selector."""

    @model_validator(mode="after")
    def _consistent(self) -> Resources:
        problems: list[tuple[str, str]] = []
        for request, limit in (("cpu", "cpu_limit"), ("memory", "memory_limit")):
            req, lim = getattr(self, request), getattr(self, limit)
            if req is not None and lim is not None and parse_quantity(lim) < parse_quantity(req):
                problems.append((limit, f"limit {lim} is below the request {req}"))
        gpu = self.gpu
        fractional = gpu is not None and 0 < gpu < 1
        if gpu is not None and gpu >= 1 and gpu != int(gpu):
            problems.append(("gpu", f"{gpu} GPUs: use a whole number, or a fraction below 1 on a shared GPU"))
        if (fractional or self.gpu_memory is not None) and self.gpu_sharing is None:
            what = f"a fractional gpu ({gpu})" if fractional else "gpuMemory"
            problems.append(("gpu_sharing", f"{what} needs a GPU-sharing scheduler; set gpuSharing: hami|runai|aliyun"))
        if self.gpu_limit is not None and gpu is not None and self.gpu_limit < gpu:
            problems.append(("gpu_limit", f"gpuLimit {self.gpu_limit} is below gpu {gpu}"))
        if self.mig_profile is not None:
            if not _MIG_PROFILE.fullmatch(self.mig_profile):
                problems.append(("mig_profile", f"{self.mig_profile!r} is not a MIG profile like 1g.5gb or 3g.20gb"))
            if fractional or self.gpu_memory is not None:
                problems.append(("mig_profile", "a MIG slice cannot be combined with a fractional gpu or gpuMemory"))
        if problems:
            raise SpecError([FieldError((to_camel(field),), message) for field, message in problems])
        return self

    def gpu_count(self) -> float:
        """GPUs this replica uses: whole, fractional, or 1 per MIG slice; 0 when none."""
        if self.mig_profile:
            return self.gpu or 1
        return self.gpu or 0
