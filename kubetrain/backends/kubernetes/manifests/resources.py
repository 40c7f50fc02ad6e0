"""A replica's resources → container requests/limits, GPU-sharing annotations, node selectors.

Whole GPUs are `nvidia.com/gpu`; a MIG slice is `nvidia.com/mig-<profile>`. Fractions of a GPU and GPU
memory exist only through a GPU-sharing scheduler, which the spec names (`resources.gpuSharing`):

- hami: nvidia.com/gpu + nvidia.com/gpucores (percent of one GPU) + nvidia.com/gpumem (MiB); on the
  volcano flavor the same through Volcano's vGPU device plugin: volcano.sh/vgpu-number/-cores/-memory.
- runai: pod annotations gpu-fraction (+ gpu-fraction-limit) or gpu-memory (MiB, + gpu-fraction-num-devices),
  schedulerName runai-scheduler unless the spec names one (KAI reads the same annotations).
- aliyun: aliyun.com/gpu-mem (GiB) + aliyun.com/gpu-core.percentage (Alibaba Cloud gpushare / cGPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ....contract.naming import is_label_key, is_label_value
from ....jobspec import GpuSharing, Resources
from ....jobspec.errors import Path
from ....jobspec.resources import is_hugepages, overcommit_allowed, quantity_problem
from ....jobspec.types import parse_quantity
from .context import Ctx, RoleView

NVIDIA_GPU = "nvidia.com/gpu"
RUNAI_SCHEDULER = "runai-scheduler"
_MIB = 2**20
_GIB = 2**30


@dataclass
class ResourcePlan:
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    """A scheduler the resources need (Run:ai's), unless the spec names one."""

    def container_resources(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.requests:
            out["requests"] = self.requests
        if self.limits:
            out["limits"] = self.limits
        return out


def _count(value: float) -> str:
    return str(int(value))


def _mib(quantity: str) -> str:
    return str(math.ceil(parse_quantity(quantity) / _MIB))


def _gib(quantity: str) -> str:
    return str(math.ceil(parse_quantity(quantity) / _GIB))


def _percent(fraction: float) -> str:
    return str(max(1, round(fraction * 100)))


def resource_plan(ctx: Ctx, view: RoleView) -> ResourcePlan:
    settings = view.settings
    res = settings.resources or Resources()
    out = ResourcePlan()
    for key, value in (("cpu", res.cpu), ("memory", res.memory)):
        if value is not None:
            out.requests[key] = value
    for key, value in (("cpu", res.cpu_limit), ("memory", res.memory_limit)):
        if value is not None:
            out.limits[key] = value
    _gpus(ctx, view, res, out)
    for key, value in res.extended_resources.items():
        out.limits[key] = value
    # Raw requests/limits (Kale's DistributedConfig) are merged over what `resources` gives.
    out.requests.update(settings.requests or {})
    out.limits.update(settings.limits or {})
    _check_container_resources(ctx, view, res, out)
    for key, value in res.capabilities.items():
        if not is_label_key(key) or not is_label_value(value):
            ctx.problems.add(ctx.where(view.role, "resources", "capabilities", key),
                             "must be a node label key and value (capabilities become a node selector)")
        else:
            out.node_selector[key] = value
    return out


def _check_container_resources(ctx: Ctx, view: RoleView, res: Resources, out: ResourcePlan) -> None:
    """The API server's rules for one container's requests and limits (ValidateResourceRequirements), on the
    merged result, so a manifest it would refuse is never rendered."""
    for section, values in (("requests", out.requests), ("limits", out.limits)):
        for key in sorted(values):
            # The spec checks each value where it is written; a value set in Python after validation
            # (assignment, model_copy, model_construct) is not revalidated, so it is caught here.
            problem = quantity_problem(key, values[key])
            if problem is not None:
                ctx.problems.add(_origin(ctx, view, res, section, key), f"{problem.message} (got {values[key]!r})",
                                 hint=problem.hint)
    for key in sorted(out.requests):
        request, limit = out.requests[key], out.limits.get(key)
        if overcommit_allowed(key):
            if limit is not None and parse_quantity(limit) < parse_quantity(request):
                ctx.problems.add(_origin(ctx, view, res, "limits", key),
                                 f"limit {limit} is below the request {request}")
        elif limit is None:
            ctx.problems.add(_origin(ctx, view, res, "requests", key),
                             f"has no limit: {_kind(key)} cannot be overcommitted, so Kubernetes needs a limit "
                             "(and the request equal to it)",
                             hint=f"give it as a limit ({key}: {request}); the request defaults to the limit")
        elif parse_quantity(limit) != parse_quantity(request):
            ctx.problems.add(_origin(ctx, view, res, "requests", key),
                             f"request {request} differs from the limit {limit}: {_kind(key)} cannot be "
                             "overcommitted, so Kubernetes needs them equal",
                             hint=f"give only the limit of {key}; the request defaults to it")
    pages = sorted(k for k in {*out.requests, *out.limits} if is_hugepages(k))
    if pages and not {"cpu", "memory"} & {*out.requests, *out.limits}:
        ctx.problems.add(_origin(ctx, view, res, "limits" if pages[0] in out.limits else "requests", pages[0]),
                         "huge pages need a cpu or memory request or limit in the same container",
                         hint="set resources.memory (or cpu)")


def _kind(key: str) -> str:
    return "huge pages" if is_hugepages(key) else "an extended resource"


def _origin(ctx: Ctx, view: RoleView, res: Resources, section: str, key: str) -> Path:
    """The spec field a container request or limit came from: the raw requests/limits, which are merged
    last, else the `resources` field that produced it."""
    raw = view.settings.requests if section == "requests" else view.settings.limits
    if raw and key in raw:
        return ctx.where(view.role, section, key)
    if key in res.extended_resources and section == "limits":
        return ctx.where(view.role, "resources", "extended_resources", key)
    if key in ("cpu", "memory"):
        return ctx.where(view.role, "resources", key if section == "requests" else f"{key}_limit")
    return ctx.where(view.role, "resources", "mig_profile" if key.startswith("nvidia.com/mig-") else "gpu")


def _gpus(ctx: Ctx, view: RoleView, res: Resources, out: ResourcePlan) -> None:
    gpu, sharing = res.gpu, res.gpu_sharing
    if res.mig_profile:
        out.limits[f"nvidia.com/mig-{res.mig_profile}"] = _count(gpu or 1)
        _same_limit(ctx, view, res, "a MIG slice")
        return
    if sharing is None:
        if gpu:
            out.limits[NVIDIA_GPU] = _count(gpu)
        _same_limit(ctx, view, res, "whole GPUs")
        return
    if sharing is GpuSharing.HAMI:
        _hami(ctx, view, res, out)
    elif sharing is GpuSharing.RUNAI:
        _runai(ctx, view, res, out)
    else:
        _aliyun(ctx, view, res, out)


def _fraction(res: Resources) -> float | None:
    return res.gpu if res.gpu is not None and 0 < res.gpu < 1 else None


def _same_limit(ctx: Ctx, view: RoleView, res: Resources, what: str) -> None:
    if res.gpu_limit is not None and res.gpu_limit != (res.gpu or (1 if res.mig_profile else 0)):
        ctx.problems.add(
            ctx.where(view.role, "resources", "gpu_limit"),
            f"{what} cannot be overcommitted on Kubernetes: gpuLimit must equal gpu",
            hint="a GPU limit above the request needs gpuSharing: runai (dynamic GPU fractions)",
        )


def _hami(ctx: Ctx, view: RoleView, res: Resources, out: ResourcePlan) -> None:
    # HAMi's own resource names, or its Volcano device plugin's when Volcano schedules the pods.
    count, memory, cores = ctx.flavor.gpu_share_resources or (NVIDIA_GPU, "nvidia.com/gpumem", "nvidia.com/gpucores")
    fraction = _fraction(res)
    out.limits[count] = "1" if fraction is not None or not res.gpu else _count(res.gpu)
    if fraction is not None:
        out.limits[cores] = _percent(fraction)
    if res.gpu_memory is not None:
        out.limits[memory] = _mib(res.gpu_memory)
    if res.gpu_limit is not None and res.gpu_limit != res.gpu:
        ctx.problems.add(ctx.where(view.role, "resources", "gpu_limit"),
                         "HAMi gives each pod a fixed share of a GPU: gpuLimit must equal gpu",
                         hint="a GPU limit above the request needs gpuSharing: runai (dynamic GPU fractions)")


def _runai(ctx: Ctx, view: RoleView, res: Resources, out: ResourcePlan) -> None:
    if not ctx.flavor.features.pod_scheduler:
        ctx.problems.unsupported(ctx.where(view.role, "resources", "gpu_sharing"),
                                 "gpuSharing runai needs the Run:ai scheduler, and Volcano schedules its own pods",
                                 ctx.flavor.name, ctx.flavors_that(lambda f: f.pod_scheduler))
        return
    out.scheduler_name = RUNAI_SCHEDULER
    fraction = _fraction(res)
    if fraction is not None and res.gpu_memory is not None:
        ctx.problems.add(ctx.where(view.role, "resources", "gpu_memory"),
                         "Run:ai takes a GPU fraction or an amount of GPU memory, not both")
        return
    if fraction is not None:
        out.annotations["gpu-fraction"] = str(fraction)
        if res.gpu_limit is not None and res.gpu_limit != fraction:
            out.annotations["gpu-fraction-limit"] = str(res.gpu_limit)
        return
    if res.gpu_memory is not None:
        out.annotations["gpu-memory"] = _mib(res.gpu_memory)
        if res.gpu and res.gpu > 1:
            out.annotations["gpu-fraction-num-devices"] = _count(res.gpu)
    elif res.gpu:
        out.limits[NVIDIA_GPU] = _count(res.gpu)
    if res.gpu_limit is not None and res.gpu_limit != res.gpu:
        ctx.problems.add(ctx.where(view.role, "resources", "gpu_limit"),
                         "with Run:ai a GPU limit applies to a fractional gpu only")


def _aliyun(ctx: Ctx, view: RoleView, res: Resources, out: ResourcePlan) -> None:
    if not ctx.flavor.features.pod_scheduler:
        ctx.problems.unsupported(ctx.where(view.role, "resources", "gpu_sharing"),
                                 "gpuSharing aliyun needs Alibaba Cloud's gpushare scheduler extender, and "
                                 "Volcano schedules its own pods", ctx.flavor.name,
                                 ctx.flavors_that(lambda f: f.pod_scheduler))
        return
    fraction = _fraction(res)
    if res.gpu_memory is None:
        if fraction is not None:
            ctx.problems.add(ctx.where(view.role, "resources", "gpu_memory"),
                             "Alibaba Cloud gpushare places pods by GPU memory: give gpuMemory with a fraction")
        elif res.gpu:
            out.limits[NVIDIA_GPU] = _count(res.gpu)
    elif res.gpu and res.gpu > 1:
        ctx.problems.add(ctx.where(view.role, "resources", "gpu"),
                         "Alibaba Cloud gpushare shares one GPU per container: gpu must be ≤ 1 with gpuMemory")
    else:
        out.limits["aliyun.com/gpu-mem"] = _gib(res.gpu_memory)
        if fraction is not None:
            out.limits["aliyun.com/gpu-core.percentage"] = _percent(fraction)
    if res.gpu_limit is not None and res.gpu_limit != res.gpu:
        ctx.problems.add(ctx.where(view.role, "resources", "gpu_limit"),
                         "Alibaba Cloud gpushare gives each pod a fixed share: gpuLimit must equal gpu",
                         hint="a GPU limit above the request needs gpuSharing: runai (dynamic GPU fractions)")


__all__ = ["NVIDIA_GPU", "RUNAI_SCHEDULER", "ResourcePlan", "resource_plan"]
