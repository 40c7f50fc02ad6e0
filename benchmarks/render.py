"""Render time and manifest size per flavor for 1, 64, 1,000 and 10,000 replicas, beside TorchX's Volcano
output for the same job when torchx is installed.

    python benchmarks/render.py                     # the table
    python benchmarks/render.py --replicas 1,1000   # other sizes
    python benchmarks/render.py --json              # machine-readable

The job: PyTorch DDP, a master and N - 1 workers (N = 1: one worker), 8 GPUs, CPU, memory and /dev/shm
per replica. Time is the median wall time of `render_manifests()` (spec → manifest dicts, size checks included)
over repeated runs; bytes are of the YAML (`kubetrain render -o yaml`) and of compact JSON (what the API server stores).
Goal (issue 4): 1,000 replicas in ≤ 20 ms and ≤ 10 KB for the job and jobset flavors.

TorchX (optional): `pip install torchx -c constraints.txt` (torch pinned to 2.13.0 there, so nothing
pulls another torch). TorchX writes one Volcano task per replica; its time is `app_to_resource()` plus
turning the client models into plain data, the same output kubetrain's render returns.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from kubetrain.backends.kubernetes.render import FLAVORS, render_manifests, to_yaml
from kubetrain.jobspec import TrainJob, from_dict

IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
GOAL_REPLICAS, GOAL_MS, GOAL_BYTES = 1000, 20.0, 10_000
BUDGET_S = 1.0
"""Time spent per measurement: as many repeats as fit (at least 3 for kubetrain, 1 for TorchX)."""


def roles(replicas: int) -> dict[str, int]:
    """N replicas in all: the master and N - 1 workers; a single replica is one worker."""
    return {"worker": 1} if replicas == 1 else {"master": 1, "worker": replicas - 1}


def job(replicas: int) -> TrainJob:
    return from_dict({
        "apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "bench"},
        "spec": {
            "framework": "pytorch", "image": IMAGE,
            "roles": {role: {"replicas": n} for role, n in roles(replicas).items()},
            "run": {"python": ["train.py", "--epochs", "10"]},
            "resources": {"cpu": 8, "memory": "32Gi", "gpu": 8, "shm": "16Gi"},
            "scheduling": {"queue": "default"},
        },
    })


def timed(fn: Callable[[], Any], min_runs: int) -> tuple[float, Any]:
    """(median seconds, last result)."""
    times: list[float] = []
    result: Any = None
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < BUDGET_S and len(times) < 1000):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def sizes(objects: list[dict[str, Any]]) -> tuple[int, int]:
    return len(to_yaml(objects).encode()), len(json.dumps(objects, separators=(",", ":")).encode())


def torchx_volcano() -> Callable[[int], list[dict[str, Any]]] | None:
    """TorchX's Volcano Job for the same job, as plain data; None when torchx is not installed."""
    try:  # imported by name: torchx is optional and ships no type information
        specs = importlib.import_module("torchx.specs")
        app_to_resource = importlib.import_module("torchx.schedulers.kubernetes_scheduler").app_to_resource
    except ImportError:
        return None
    from kubernetes.client import ApiClient

    client = ApiClient()

    def build(replicas: int) -> list[dict[str, Any]]:
        resource = specs.Resource(cpu=8, gpu=8, memMB=32 * 1024)
        app_roles = [
            specs.Role(name=name, image=IMAGE, entrypoint="python", args=["train.py", "--epochs", "10"],
                       num_replicas=n, resource=resource)
            for name, n in roles(replicas).items()
        ]
        app = specs.AppDef(name="bench", roles=app_roles)
        obj: dict[str, Any] = client.sanitize_for_serialization(
            app_to_resource(app, queue="default", service_account=None, priority_class=None))
        return [obj]

    return build


def measure(replicas: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in replicas:
        spec = job(n)
        for flavor in FLAVORS:
            seconds, rendered = timed(functools.partial(render_manifests, spec, flavor), 3)
            objects = rendered.objects
            yaml_bytes, json_bytes = sizes(objects)
            rows.append({"tool": "kubetrain", "flavor": flavor, "replicas": n, "ms": seconds * 1000,
                         "yaml_bytes": yaml_bytes, "json_bytes": json_bytes})
    build = torchx_volcano()
    if build is not None:
        for n in replicas:
            seconds, objects = timed(functools.partial(build, n), 1)
            yaml_bytes, json_bytes = sizes(objects)
            rows.append({"tool": "torchx", "flavor": "volcano", "replicas": n, "ms": seconds * 1000,
                         "yaml_bytes": yaml_bytes, "json_bytes": json_bytes})
    return rows


def goal_met(rows: list[dict[str, Any]]) -> bool:
    checked = [r for r in rows if r["tool"] == "kubetrain" and r["flavor"] in ("job", "jobset")
               and r["replicas"] == GOAL_REPLICAS]
    return bool(checked) and all(r["ms"] <= GOAL_MS and r["yaml_bytes"] <= GOAL_BYTES for r in checked)


def print_table(rows: list[dict[str, Any]], torchx_missing: bool) -> None:
    print(f"{'tool':<10} {'flavor':<9} {'replicas':>8} {'time':>11} {'YAML':>12} {'JSON':>12}")
    for r in rows:
        print(f"{r['tool']:<10} {r['flavor']:<9} {r['replicas']:>8,} {r['ms']:>8.2f} ms "
              f"{r['yaml_bytes']:>10,} B {r['json_bytes']:>10,} B")
    if torchx_missing:
        print("\ntorchx is not installed: no TorchX column. To compare: pip install torchx -c constraints.txt "
              "(torch stays pinned to 2.13.0)")
    if any(r["replicas"] == GOAL_REPLICAS for r in rows):
        verdict = "met" if goal_met(rows) else "NOT met"
        print(f"\ngoal, {GOAL_REPLICAS:,} replicas in ≤ {GOAL_MS:g} ms and ≤ {GOAL_BYTES:,} B (job, jobset): {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--replicas", default="1,64,1000,10000", help="comma-separated replica counts")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    replicas = [int(x) for x in args.replicas.split(",") if x]
    rows = measure(replicas)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, torchx_volcano() is None)
    return 0 if goal_met(rows) or GOAL_REPLICAS not in replicas else 1


if __name__ == "__main__":
    sys.exit(main())
