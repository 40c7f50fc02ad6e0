"""The Kubernetes backend against the API emulator: API requests per job, and how fast status follows events.

    python benchmarks/cluster.py                    # both tables
    python benchmarks/cluster.py --steps 10,100,1000 --repeats 20
    python benchmarks/cluster.py --json

Requests per job: ``kubetrain run`` (attached: output followed, status watched, Pending causes looked up)
from submit to completion, for each flavor and job lengths of N steps (a log line per replica per step,
a pod status change every 10 steps). Every request the emulator answers is counted; "created" are the
objects the job consists of. Goal: requests = created + a constant, the same for every length.

Latency: from the moment the emulator records an event (a replica fails; the engine marks the job
Succeeded) to the moment ``run`` reports it (``on_event``). A client polling every P seconds would
show it after P/2 on average (P for the worst case).

The emulator plays the controllers (``kube_emulator.controllers``) and the kubelet exactly as the tests do.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# kubetrain and kube_emulator are installed (scripts/test.sh): nothing is imported from the repository.
from kube_emulator.controllers import Controllers
from kube_emulator.emulator import KubeEmulator

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client.retry import RetryPolicy
from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.contract.labels import JOB_LABEL, ROLE_LABEL
from kubetrain.jobspec import from_dict
from kubetrain.terminal import OutputSink

os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))

REPLICAS = 2
IMAGE = "busybox:1.36"


def job_doc(name: str, replicas: int = REPLICAS) -> dict[str, Any]:
    """The measured job: replicas running ``echo hello`` (the emulator's kubelet plays what they print)."""
    spec = {"framework": "pytorch", "replicas": replicas, "image": IMAGE, "run": {"exec": ["sh", "-c", "echo hello"]},
            "resources": {"cpu": "10m", "memory": "16Mi"}}
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def controllers(emu: KubeEmulator) -> Controllers:
    return Controllers(emu, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL)


def _wait(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the backend did not create the job")
        time.sleep(0.002)


class Run:
    """``backend.run`` in a thread; events timestamped as they are reported."""

    def __init__(self, backend: KubernetesBackend, doc: dict[str, Any]) -> None:
        self.events: list[tuple[float, str]] = []
        self.result: Any = None
        sink = OutputSink(out=io.StringIO(), err=io.StringIO(), color=False)

        def on_event(text: str) -> None:
            self.events.append((time.perf_counter(), text))

        def run() -> None:
            self.result = backend.run(from_dict(doc), sink=sink, on_event=on_event)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def when(self, text: str, timeout: float = 10.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, e in list(self.events):
                if text in e:
                    return t
            time.sleep(0.0005)
        raise TimeoutError(f"no event {text!r}: {[e for _, e in self.events]}")


def _root_created(emu: KubeEmulator, flavor: str, name: str) -> bool:
    kind = str(FLAVORS[flavor].resources[0])  # a PyTorch job: the first kind is the one rendered (kubeflow too)
    return bool(emu.objects(kind, "default", label_selector=f"{JOB_LABEL}={name}"))


def requests_per_job(emu: KubeEmulator, backend: KubernetesBackend, flavor: str, steps: int) -> dict[str, Any]:
    name = f"req-{flavor}-{steps}"
    played = controllers(emu)
    emu.clear_requests()
    run = Run(backend, job_doc(name))
    _wait(lambda: _root_created(emu, flavor, name))
    pods = played.create_pods(flavor, name)
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
    for step in range(steps):
        for replica, pod in pods.items():
            emu.append_log("default", pod, f"{replica} step {step} loss {1 / (step + 1):.4f}\n")
        if step % 10 == 9:
            for pod in pods.values():
                emu.patch_status("pods", pod, {"message": f"step {step}"})
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    played.conclude(flavor, name, "Succeeded")
    run.thread.join(30)
    if run.result is None or run.result.exit_code != 0:
        raise RuntimeError(f"{name} did not succeed: {run.result}")
    created = sum(1 for r in emu.requests if r.method == "POST")
    total = len(emu.requests)
    logs = sum(1 for r in emu.requests if r.path.endswith("/log"))
    watches = sum(1 for r in emu.requests if r.query.get("watch") == "true")
    return {"flavor": flavor, "steps": steps, "created": created, "requests": total, "constant": total - created,
            "watches": watches, "log_streams": logs}


def latency(emu: KubeEmulator, backend: KubernetesBackend, flavor: str, index: int) -> dict[str, float]:
    """Seconds from a replica's failure to its report, and from the engine's verdict to the job's end."""
    name = f"lat-{flavor}-{index}"
    played = controllers(emu)
    run = Run(backend, job_doc(name))
    _wait(lambda: _root_created(emu, flavor, name))
    pods = played.create_pods(flavor, name)
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
    run.when(f"job {name} Running")
    t0 = time.perf_counter()
    emu.set_pod_phase("default", pods["worker-1"], "Failed", exit_code=3)
    replica = run.when("worker-1 failed") - t0
    t1 = time.perf_counter()
    played.conclude(flavor, name, "Failed")
    job = run.when(f"job {name} Failed") - t1
    run.thread.join(30)
    return {"replica": replica, "job": job}


def measure(steps: list[int], repeats: int, flavors: list[str]) -> dict[str, Any]:
    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        rows = []
        lat: dict[str, dict[str, list[float]]] = {}
        for flavor in flavors:
            for n in steps:
                emu.reset()
                backend = KubernetesBackend(kubeconfig=kubeconfig, flavor=flavor,
                                            retry=RetryPolicy(base=0.01, cap=0.1), log_grace=0.5)
                rows.append(requests_per_job(emu, backend, flavor, n))
                backend.close()
            emu.reset()
            backend = KubernetesBackend(kubeconfig=kubeconfig, flavor=flavor, log_grace=0.5)
            samples = [latency(emu, backend, flavor, i) for i in range(repeats)]
            backend.close()
            lat[flavor] = {k: [s[k] for s in samples] for k in ("replica", "job")}
        return {"requests": rows, "latency": lat}


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:7.1f} {p90 * 1000:7.1f} {ordered[-1] * 1000:7.1f}"


def print_tables(data: dict[str, Any]) -> bool:
    rows = data["requests"]
    print(f"{'flavor':<9} {'steps':>6} {'created':>8} {'requests':>9} {'constant':>9} {'watches':>8} {'logs':>5}")
    for r in rows:
        print(f"{r['flavor']:<9} {r['steps']:>6} {r['created']:>8} {r['requests']:>9} {r['constant']:>9} "
              f"{r['watches']:>8} {r['log_streams']:>5}")
    constant = {}
    for r in rows:
        constant.setdefault(r["flavor"], set()).add(r["constant"])
    ok = all(len(v) == 1 for v in constant.values())
    verdict = "met" if ok else "NOT met"
    print(f"\ngoal, requests = created + a constant independent of the job's length: {verdict}")
    print("\nlatency, event → reported by `run` (ms)     median     p90     max")
    for flavor, lat in data["latency"].items():
        print(f"  {flavor:<9} replica failed → reported  {_ms(lat['replica'])}")
        print(f"  {flavor:<9} job ended → reported       {_ms(lat['job'])}")
    print("  (polling every 2 s would report after 1000 ms on average, 2000 ms at worst)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", default="10,100,1000", help="job lengths, comma-separated")
    parser.add_argument("--repeats", type=int, default=10, help="latency samples per flavor")
    parser.add_argument("--flavors", default=",".join(FLAVORS))
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    data = measure([int(x) for x in args.steps.split(",") if x], args.repeats,
                   [f for f in args.flavors.split(",") if f])
    if args.json:
        print(json.dumps(data, indent=2))
        constant: dict[str, set[int]] = {}
        for r in data["requests"]:
            constant.setdefault(r["flavor"], set()).add(r["constant"])
        return 0 if all(len(v) == 1 for v in constant.values()) else 1
    return 0 if print_tables(data) else 1


if __name__ == "__main__":
    sys.exit(main())
