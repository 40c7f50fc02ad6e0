"""One job walked through `KubernetesBackend.run` on the API emulator, module by module: which modules of the
Kubernetes backend it enters, the calls between them, and those that run back up the layers of
`kubetrain.backends.kubernetes` (its import-linter contract in pyproject.toml).

    python scripts/walk_run.py [--flavor job] [--edges]
    PYTHONPATH=/path/to/other/checkout python scripts/walk_run.py     # another tree, the same layers

A profile hook (`sys.setprofile`, `threading.setprofile`: the log and watch threads too) sees every call from the
submit to the job's end: the emulator plays the controller and the kubelet (pods Running, a line each, Succeeded)
while `run` follows the job attached. Also counted: how many times the job is planned (`kubetrain.plan.plan`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "scripts"))
sys.path.append(str(ROOT))

from import_graph import layer_index, layers_of  # noqa: E402  (a script beside this one)

PACKAGE = "kubetrain.backends.kubernetes"


def job_doc(name: str) -> dict[str, Any]:
    spec = {"framework": "pytorch", "replicas": 2, "image": "busybox:1.36",
            "run": {"exec": ["sh", "-c", "echo hello"]}, "resources": {"cpu": "10m", "memory": "16Mi"}}
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


class Walk:
    """The profile hook: calls from one module of the package into another."""

    def __init__(self, layers: list[list[str]]) -> None:
        self.layers = layers
        self.entered: Counter[str] = Counter()
        self.edges: Counter[tuple[str, str]] = Counter()
        self.plans = 0
        self.lock = threading.Lock()

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module == "kubetrain.plan" and frame.f_code.co_name == "plan":
            with self.lock:
                self.plans += 1
        if not module.startswith(PACKAGE):
            return
        caller = frame.f_back
        # A call through code outside the package (a callback handed to the standard library, a thread's
        # target) comes from the nearest frame of the package below it.
        while caller is not None and not caller.f_globals.get("__name__", "").startswith(PACKAGE):
            caller = caller.f_back
        source = caller.f_globals.get("__name__", "") if caller is not None else ""
        with self.lock:
            self.entered[module] += 1
            if source and source != module:
                self.edges[(source, module)] += 1

    def upward(self) -> list[tuple[str, str, int]]:
        out = []
        for (source, target), n in sorted(self.edges.items()):
            low, high = layer_index(source, self.layers), layer_index(target, self.layers)
            if low is not None and high is not None and high < low:
                out.append((source, target, n))
        return out


def walk(flavor: str, pyproject: Path) -> tuple[Walk, int]:
    from kube_emulator.controllers import Controllers
    from kube_emulator.emulator import KubeEmulator

    from kubetrain.backends.kubernetes.backend import KubernetesBackend
    from kubetrain.contract.labels import JOB_LABEL, ROLE_LABEL
    from kubetrain.jobspec import from_dict
    from kubetrain.terminal import OutputSink

    os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))
    recorder = Walk(layers_of(PACKAGE, pyproject))
    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        played = Controllers(emu, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL)
        backend = KubernetesBackend(kubeconfig=kubeconfig, flavor=flavor, log_grace=0.5)
        job = from_dict(job_doc("walk"))
        result: list[Any] = []
        sink = OutputSink(out=io.StringIO(), err=io.StringIO(), color=False)

        def run() -> None:
            threading.setprofile(recorder.hook)
            sys.setprofile(recorder.hook)
            try:
                result.append(backend.run(job, sink=sink, on_event=lambda text: None))
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 30
        while not emu.objects(str(backend_resource(flavor)), "default", label_selector=f"{JOB_LABEL}=walk"):
            if time.monotonic() > deadline:
                raise TimeoutError("the job was not created")
            time.sleep(0.005)
        pods = played.create_pods(flavor, "walk")
        for replica, pod in pods.items():
            emu.set_pod_phase("default", pod, "Running")
            emu.append_log("default", pod, f"hello from {replica}\n")
        for pod in pods.values():
            emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
        played.conclude(flavor, "walk", "Succeeded")
        thread.join(60)
        backend.close()
        if not result or result[0].exit_code != 0:
            raise RuntimeError(f"the job did not succeed: {result}")
    return recorder, result[0].exit_code


def backend_resource(flavor: str) -> str:
    from kubetrain.backends.kubernetes.flavors import FLAVORS

    return str(FLAVORS[flavor].resources[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavor", default="job")
    parser.add_argument("--edges", action="store_true", help="list the calls between modules")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml", help="where the layers are")
    args = parser.parse_args()
    recorder, _ = walk(args.flavor, args.pyproject)
    upward = recorder.upward()
    result = {
        "flavor": args.flavor,
        "modules_entered": len(recorder.entered),
        "module_to_module_paths": len(recorder.edges),
        "calls_between_modules": sum(recorder.edges.values()),
        "paths_back_up_a_layer": len(upward),
        "calls_back_up_a_layer": sum(n for _, _, n in upward),
        "plans": recorder.plans,
    }
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    if args.edges:
        short = len(PACKAGE) + 1
        for (source, target), n in sorted(recorder.edges.items()):
            up = " (back up)" if any((source, target) == (s, t) for s, t, _ in upward) else ""
            print(f"  {source[short:]} -> {target[short:]}: {n}{up}")


if __name__ == "__main__":
    main()
