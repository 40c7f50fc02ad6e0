"""The GPUs of this machine, and which of them each replica of a local job gets.

Discovery (`discover_gpus`): `nvidia-smi -L` when it is on PATH (GPUs and their MIG devices), else the
driver's `/proc/driver/nvidia/gpus/<PCI bus id>/` entries (GPUs only). Both number GPUs in PCI bus order,
which is what `CUDA_VISIBLE_DEVICES` indices mean once `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set (CUDA's own
default is fastest first), so each replica gets both. A `CUDA_VISIBLE_DEVICES` in kubetrain's own
environment limits the GPUs its jobs may use (a shared machine).

Assignment (`assign_gpus`), in replica order, as a device plugin gives each pod its own devices:

- whole GPUs: disjoint indices, `CUDA_VISIBLE_DEVICES=0,1`;
- a MIG slice: a MIG device of that profile when `nvidia-smi -L` lists one (its UUID); else a whole GPU,
  with a warning;
- a share of a GPU (a fraction, or gpuMemory): a GPU no replica has whole, packed first fit so the shares
  on one GPU add up to at most 1, with a warning (nothing limits a process's memory or compute locally);
- a replica asking for none, in a job that asks for some: `CUDA_VISIBLE_DEVICES=` (none), as in a pod.

A job asking for more than there is is refused with the counts. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

VISIBLE = "CUDA_VISIBLE_DEVICES"
ORDER = "CUDA_DEVICE_ORDER"
PCI_ORDER = "PCI_BUS_ID"
NVIDIA_SMI_TIMEOUT = 20.0
"""Seconds `nvidia-smi -L` may take (it waits for the driver to wake the GPUs up)."""

_GPU_LINE = re.compile(r"GPU (\d+): (.*?) \(UUID: ([^)]+)\)")
_MIG_LINE = re.compile(r"\s+MIG (\S+)\s+Device\s+\d+: \(UUID: ([^)]+)\)")


@dataclass(frozen=True)
class MigDevice:
    profile: str
    """`1g.5gb`, as `nvidia-smi -L` names it."""
    uuid: str
    """`MIG-...`: what CUDA_VISIBLE_DEVICES takes for a MIG device."""


@dataclass(frozen=True)
class Gpu:
    index: int
    """Its index in PCI bus order (nvidia-smi's): what CUDA_VISIBLE_DEVICES names it by."""
    name: str = ""
    uuid: str = ""
    mig: tuple[MigDevice, ...] = ()
    """Its MIG devices: a GPU in MIG mode runs work only on those, never as a whole."""


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs a local job may use, and how they were found (said when a job asks for too many)."""

    gpus: tuple[Gpu, ...] = ()
    source: str = ""

    @property
    def whole(self) -> tuple[Gpu, ...]:
        """The GPUs usable as a whole (not in MIG mode)."""
        return tuple(g for g in self.gpus if not g.mig)

    def mig_devices(self, profile: str) -> list[MigDevice]:
        return [m for g in self.gpus for m in g.mig if m.profile == profile]


def discover_gpus(
    *, environ: Mapping[str, str] | None = None, proc_root: str | os.PathLike[str] = "/proc"
) -> GpuInventory:
    """This machine's GPUs: `nvidia-smi -L` if it is on `environ`'s PATH and answers, else the entries
    under `proc_root`/driver/nvidia/gpus; then only those the caller's CUDA_VISIBLE_DEVICES lets through.
    `environ` (default: os.environ) and `proc_root` let a test put a fake nvidia-smi or a fake /proc there."""
    env = os.environ if environ is None else environ
    gpus: list[Gpu] | None = None
    smi = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if smi is not None:
        gpus = _from_nvidia_smi(smi, env)
        source = "nvidia-smi -L"
    if gpus is None:
        folder = Path(proc_root, "driver", "nvidia", "gpus")
        gpus = _from_proc(folder)
        source = str(folder) if smi is None else f"{folder} ({smi} -L failed)"
        if not gpus:
            source = f"{'no nvidia-smi on PATH' if smi is None else f'{smi} -L failed'}, nothing in {folder}"
    visible = env.get(VISIBLE)
    if visible is not None:
        kept = _visible(gpus, visible)
        source += f"; {VISIBLE}={visible} leaves {len(kept)} of {len(gpus)}"
        gpus = kept
    return GpuInventory(tuple(gpus), source)


def _from_nvidia_smi(program: str, env: Mapping[str, str]) -> list[Gpu] | None:
    """GPUs and MIG devices from `nvidia-smi -L`; None when it fails (no driver loaded)."""
    try:
        out = subprocess.run(
            [program, "-L"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return parse_nvidia_smi(out.stdout)


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """`nvidia-smi -L` output → GPUs, each with the MIG devices listed under it."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu is not None:
            gpus.append(Gpu(int(gpu.group(1)), gpu.group(2), gpu.group(3)))
            continue
        mig = _MIG_LINE.match(line)
        if mig is not None and gpus:
            last = gpus[-1]
            gpus[-1] = Gpu(last.index, last.name, last.uuid, (*last.mig, MigDevice(mig.group(1), mig.group(2))))
    return gpus


def _from_proc(folder: Path) -> list[Gpu]:
    """GPUs from the driver's /proc entries, one folder per GPU named by its PCI bus id: numbered in that
    order, as nvidia-smi does."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
    gpus = []
    for index, entry in enumerate(entries):
        info: dict[str, str] = {}
        try:
            for line in (entry / "information").read_text(errors="replace").splitlines():
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
        except OSError:
            pass
        gpus.append(Gpu(index, info.get("Model", ""), info.get("GPU UUID", "")))
    return gpus


def _visible(gpus: Sequence[Gpu], visible: str) -> list[Gpu]:
    """The GPUs a CUDA_VISIBLE_DEVICES value names (indices or UUID prefixes, up to the first invalid
    entry, as CUDA reads it)."""
    kept: list[Gpu] = []
    for item in (part.strip() for part in visible.split(",")):
        match = None
        if item.isdigit():
            match = next((g for g in gpus if g.index == int(item)), None)
        elif item.startswith("GPU-"):
            match = next((g for g in gpus if g.uuid.startswith(item)), None)
        if match is None:
            break
        if match not in kept:
            kept.append(match)
    return kept


# -- assignment -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRequest:
    """What one replica asks for."""

    replica: str
    """Its key: `worker-0`."""
    role: str
    path: str
    """The spec field that asks (`spec.roles.worker.resources.gpu`), for messages."""
    whole: int = 0
    share: float = 0.0
    """A fraction of one GPU (0 < share < 1), or 0."""
    shared: bool = False
    """A share of a GPU: a fraction, or gpuMemory."""
    mig: str | None = None
    """A MIG profile: `whole` slices of it."""
    hosts: bool = False
    """It runs no process of its own: another replica (MPI's or DeepSpeed's launcher) starts its ranks."""


@dataclass
class GpuAssignment:
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Replica key → CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (every replica, when any asks)."""
    warnings: list[str] = field(default_factory=list)
    problems: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(the `GpuRequest.path` of the first replica asking, message, hint): the job cannot run here."""


def _hint(path: str) -> str:
    none = f", or none (--set {path}=0)" if path.endswith(".gpu") else ""
    return f"ask for fewer (resources.gpu, replicas){none}, or run it where there are more (--backend kubernetes)"


def assign_gpus(requests: Sequence[GpuRequest], inventory: GpuInventory) -> GpuAssignment:
    """Devices for each replica (`requests` in replica order, every replica of the job), or the problems."""
    out = GpuAssignment()
    if not any(r.whole or r.shared or r.mig for r in requests):
        return out
    devices: dict[str, list[str]] = {r.replica: [] for r in requests}
    # MIG slices: this machine's MIG devices of the profile; without any, whole GPUs stand in.
    mig_fallback: set[str] = set()
    for profile in dict.fromkeys(r.mig for r in requests if r.mig):
        asking = [r for r in requests if r.mig == profile]
        free = inventory.mig_devices(profile)
        if not free:
            mig_fallback.update(r.replica for r in asking)
            out.warnings.append(
                f"{asking[0].path}: {profile} is approximated locally: this machine lists no MIG {profile} "
                f"device ({inventory.source}), so each replica gets {_count(asking[0].whole, 'whole GPU')} instead"
            )
            continue
        needed = sum(r.whole for r in asking)
        if needed > len(free):
            out.problems.append(
                (asking[0].path, f"the job asks for {needed} MIG {profile} device{_s(needed)} ({_breakdown(asking)}); "
                 f"this machine has {len(free)}", _hint(asking[0].path))
            )
            continue
        for r in asking:
            devices[r.replica] += [m.uuid for m in free[: r.whole]]
            free = free[r.whole :]
    # Whole GPUs (and MIG stand-ins), then the shares on the GPUs left.
    whole = [r for r in requests if r.whole and (not r.mig or r.replica in mig_fallback)]
    shares = [r for r in requests if r.shared and not r.whole]
    pool = list(inventory.whole)
    bins = _pack([r.share for r in shares])
    needed = sum(r.whole for r in whole) + len(bins)
    if needed > len(pool):
        asked = _breakdown(whole, shares, len(bins))
        path = (*whole, *shares)[0].path
        out.problems.append(
            (
                path,
                f"the job asks for {needed} GPU{_s(needed)} ({asked}); this machine has {len(pool)} "
                f"({inventory.source})",
                _hint(path),
            )
        )
        return out
    for r in whole:
        devices[r.replica] += [str(g.index) for g in pool[: r.whole]]
        pool = pool[r.whole :]
    placed: dict[int, list[GpuRequest]] = {}
    for members, gpu in zip(bins, pool, strict=False):
        for i in members:
            devices[shares[i].replica].append(str(gpu.index))
            placed.setdefault(gpu.index, []).append(shares[i])
    for role in dict.fromkeys(r.role for r in shares):
        mine = [r for r in shares if r.role == role]
        where = "; ".join(
            f"{', '.join(keys)} on GPU {index}"
            for index, on in placed.items()
            if (keys := [r.replica for r in on if r.role == role])
        )
        what = f"{mine[0].share:g} of a GPU" if mine[0].share else "gpuMemory"
        out.warnings.append(
            f"{mine[0].path}: {what} is approximated locally: replicas share whole GPUs ({where}), with no limit "
            "on the memory or compute each one uses (a GPU-sharing scheduler enforces those on a cluster)"
        )
    # Ranks another replica starts (mpirun, the deepspeed launcher) run in that replica's processes.
    hosted = [d for r in requests if r.hosts for d in devices[r.replica]]
    if hosted:
        launchers = [r for r in requests if not r.hosts]
        for r in launchers:
            devices[r.replica] += [d for d in hosted if d not in devices[r.replica]]
        first = next(r for r in requests if r.hosts and devices[r.replica])
        out.warnings.append(
            f"{first.path}: {', '.join(r.replica for r in launchers)} starts the ranks of the replicas that ask "
            f"for GPUs on this machine: they all see their GPUs ({','.join(hosted)}) and pick theirs by local rank"
        )
    for r in requests:
        out.env[r.replica] = {VISIBLE: ",".join(devices[r.replica]), ORDER: PCI_ORDER}
    return out


def _pack(shares: Sequence[float]) -> list[list[int]]:
    """Shares (0 ≤ s < 1) onto as few GPUs as first fit finds, in order: lists of indexes into `shares`."""
    bins: list[list[int]] = []
    loads: list[float] = []
    for i, share in enumerate(shares):
        for b, load in enumerate(loads):
            if load + share <= 1.0 + 1e-9:
                bins[b].append(i)
                loads[b] += share
                break
        else:
            bins.append([i])
            loads.append(share)
    return bins


def _breakdown(whole: Sequence[GpuRequest], shares: Sequence[GpuRequest] = (), shared_gpus: int = 0) -> str:
    """`2 replicas × 2`, per role when several roles ask (`master: 1 replica × 1, worker: ...`)."""
    groups: dict[tuple[str, str], int] = {}
    for r in whole:
        groups[(r.role, f"{r.whole}")] = groups.get((r.role, f"{r.whole}"), 0) + 1
    for r in shares:
        what = f"{r.share:g}" if r.share else "a share"
        groups[(r.role, what)] = groups.get((r.role, what), 0) + 1
    roles = {role for role, _ in groups}
    parts = [
        (f"{role}: " if len(roles) > 1 else "") + f"{_count(n, 'replica')} × {what}"
        for (role, what), n in groups.items()
    ]
    if shares:
        parts.append(f"the shares on {_count(shared_gpus, 'GPU')}")
    return ", ".join(parts)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{_s(n)}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


__all__ = [
    "Gpu",
    "GpuAssignment",
    "GpuInventory",
    "GpuRequest",
    "MigDevice",
    "assign_gpus",
    "discover_gpus",
    "parse_nvidia_smi",
]
