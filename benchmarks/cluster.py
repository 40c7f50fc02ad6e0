"""The Kubernetes backend against the API emulator: API requests per job, and how fast status follows events.

    python benchmarks/cluster.py                    # both tables
    python benchmarks/cluster.py --steps 10,100,1000 --repeats 20
    python benchmarks/cluster.py --json
    python benchmarks/cluster.py --scale 100,1000   # an attached run of N replicas: memory, threads, files

Requests per job: ``kubetrain run`` (attached: output followed, status watched, Pending causes looked up)
from submit to completion, for each flavor and job lengths of N steps (a log line per replica per step,
a pod status change every 10 steps). Every request the emulator answers is counted; "created" are the
objects the job consists of. Goal: requests = created + a constant, the same for every length.

Latency: from the moment the emulator records an event (a replica fails; the engine marks the job
Succeeded) to the moment ``run`` reports it (``on_event``). A client polling every P seconds would
show it after P/2 on average (P for the worst case).

Scale (``--scale``): ``kubetrain run`` (the CLI, attached, job flavor) of N replicas in a process of its own,
every replica Running and printing, with the default ``--max-log-requests`` (5) and with every replica
followed (``--max-log-requests N``: one stream and thread per pod, as before it was bounded). The run's peak
RSS (VmHWM), threads and open files; the time from the command's start to each followed replica's first line
(beside the time its line was written: the emulator makes 10,000 pods in seconds); the time from a replica's
failure (one not followed) to ``run`` saying so; ``kubetrain status`` of the running job (the whole command,
interpreter and imports included, left out with ``--no-verbs``), and
``kubectl get pods`` for the same pods in the same run where kubectl is installed.
``kubetrain describe`` and ``list`` too, each as a ratio to kubectl's time (below 1: faster than kubectl).
``--tracemalloc DIR`` profiles the run's live allocations by line (nearest its peak) into DIR: where its
memory goes (the run is then several times slower; its figures are not the run's).

The emulator plays the controllers (``kube_emulator.controllers``) and the kubelet exactly as the tests do.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bytecode import compile_kubetrain  # beside this file

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
    constant: dict[str, set[int]] = {}
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


KUBETRAIN = str(Path(sys.executable).with_name("kubetrain"))
"""The installed command, beside the interpreter running this (the venv's)."""


def _proc(pid: int) -> dict[str, int]:
    """A process's peak RSS (MB), threads and open files, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": int(fields["VmHWM"].split()[0]) // 1024, "threads": int(fields["Threads"]),
            "files": len(os.listdir(f"/proc/{pid}/fd"))}


def _rss_mb(pid: int) -> float | None:
    """A process's resident memory now (VmRSS, MB), None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class RssSampler:
    """``--sample-rss MS``: the run's VmRSS every MS milliseconds, from outside (a thread of the benchmark), and
    the moments the benchmark marks (the job submitted, every pod Running, ...): when the peak happened, beside
    what the run was doing then. Off (``every`` None), it samples nothing."""

    def __init__(self, pid: int, started: float, every: float | None) -> None:
        self.pid, self.started, self.every = pid, started, every
        self.samples: list[tuple[float, float]] = []
        self.marks: list[tuple[float, str]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if every else None
        if self._thread is not None:
            self._thread.start()

    def _run(self) -> None:
        assert self.every is not None
        while not self._done.is_set():
            rss = _rss_mb(self.pid)
            if rss is None:
                return
            self.samples.append((time.perf_counter() - self.started, rss))
            self._done.wait(self.every)

    def mark(self, what: str) -> None:
        self.marks.append((time.perf_counter() - self.started, what))

    def stop(self) -> dict[str, Any]:
        self._done.set()
        if self._thread is None:
            return {}
        self._thread.join(5)
        if not self.samples:
            return {}
        peak_s, peak = max(self.samples, key=lambda s: s[1])
        before = [what for t, what in self.marks if t <= peak_s]
        return {"rss_peak_at_s": round(peak_s, 2), "rss_peak_sampled_mb": round(peak, 1),
                "rss_peak_after": before[-1] if before else "start",
                "rss_marks": [(round(t, 2), what) for t, what in self.marks],
                "rss_samples": [(round(t, 2), round(mb, 1)) for t, mb in self.samples]}


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def attached_run(emu: KubeEmulator, kubeconfig: Path, tmp: Path, replicas: int, max_logs: int | None) -> dict[str, Any]:
    """One attached `kubetrain run` of `replicas` replicas, measured from outside (see the module's docstring)."""
    name = f"scale-{replicas}-{max_logs or 'default'}"
    played = controllers(emu)
    job_file = tmp / f"{name}.json"
    job_file.write_text(json.dumps(job_doc(name, replicas)))
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    argv = [KUBETRAIN, "run", "--backend", "kubernetes", "--kubeconfig", str(kubeconfig),
            "--flavor", "job", str(job_file)]
    if max_logs is not None:
        argv += ["--max-log-requests", str(max_logs)]
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp / "home")}
    env.update(_tracing_env(tmp, TRACE_TO / f"{name}.txt" if TRACE_TO is not None else None))
    followed = replicas if max_logs is not None else min(replicas, 5)
    # The time from the command's start to each followed replica's first line, noted as each appears by a thread
    # reading the output while the emulator makes the pods (the first replicas print while the last are made).
    lines: list[float] = []
    done = threading.Event()

    def note_lines() -> None:
        while not done.is_set() and len(lines) < followed:
            now = time.perf_counter() - started
            lines.extend([now] * (_text(out).count(" step 0") - len(lines)))
            time.sleep(0.02)

    started = time.perf_counter()
    with out.open("wb") as o, err.open("wb") as e:
        child = subprocess.Popen(argv, stdout=o, stderr=e, env=env)
    sampler = RssSampler(child.pid, started, SAMPLE_RSS)
    noter = threading.Thread(target=note_lines, daemon=True)
    noter.start()
    try:
        _wait(lambda: _root_created(emu, "job", name), timeout=60)
        # Imports done and the job submitted, no pod yet: what the run holds before it holds any replica.
        submitted_mb = _rss_mb(child.pid)
        sampler.mark("submitted")
        pods = played.create_pods("job", name)
        sampler.mark("pods created")
        # Rank 0 first: the followed replicas run and print first, and their streams can open while the others
        # are made (as on a cluster, where pods start over seconds).
        written_s = None
        for n, (replica, pod) in enumerate(pods.items(), 1):
            emu.set_pod_phase("default", pod, "Running")
            emu.append_log("default", pod, f"{replica} step 0\n")
            if n == followed:
                written_s = time.perf_counter() - started
        running_s = time.perf_counter() - started
        sampler.mark("pods running")
        # Every followed replica's line printed: every stream is open (or as many as opened in 2 minutes: one
        # stream per pod may not get there on a loaded machine; the row says how many were printed).
        noter.join(120)
        done.set()
        sampler.mark("lines printed")
        printed = _text(out).count(" step 0")
        if printed < followed:  # the run's threads, to see where the missing streams are
            child.send_signal(signal.SIGUSR1)
            time.sleep(2)
            print(f"{name}: {printed} of {followed} lines printed; the run's threads:\n{_text(err)[-20000:]}",
                  file=sys.stderr)
        # The run's list requests for pods (pages): one, or a relist's 20 at 10,000 (the watch fell behind by more
        # than the emulator's 10,000 events of history).
        pod_lists = sum(1 for r in emu.requests if r.method == "GET" and r.path.endswith("/pods")
                        and r.query.get("watch") != "true")
        verbs = time_verbs(kubeconfig, env, name) if TIME_VERBS else {}
        used = _proc(child.pid)
        last = f"worker-{replicas - 1}"
        emu.append_log("default", pods[last], "Traceback (most recent call last):\nValueError: bad shape\n")
        sampler.mark("replica fails")
        t0 = time.perf_counter()
        emu.set_pod_phase("default", pods[last], "Failed", exit_code=3)
        _wait(lambda: f"{last} failed" in _text(err), timeout=120)
        failure_s = time.perf_counter() - t0
        _wait(lambda: f"[{last}] ValueError: bad shape" in _text(out), timeout=60)
        # The Job controller's verdict, without deleting the other pods one by one (the emulator's slow path at
        # 10,000 pods, and nothing `run` is measured on): the attached run ends on the Job's Failed condition.
        failed = [{"type": kind, "status": "True", "reason": "BackoffLimitExceeded", "message": f"{last} failed",
                   "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                  for kind in ("FailureTarget", "Failed")]
        emu.patch_status("jobs", f"{name}-worker", {"conditions": failed}, "default")
        sampler.mark("job fails")
        child.wait(120)
    finally:
        sampled = sampler.stop()
        if child.poll() is None:
            child.kill()
            child.wait()
    return {"replicas": replicas, "max_log_requests": max_logs or 5, "every_replica": max_logs is not None,
            "printed": printed, **used,
            "submitted_rss_mb": submitted_mb, **sampled,
            "pod_lists": pod_lists,
            "running_s": running_s, "written_s": written_s, "first_line_s": lines[0] if lines else None,
            "last_first_line_s": lines[-1] if lines else None, "failure_to_report_s": failure_s, **verbs}


TIME_VERBS = True
SAMPLE_RSS: float | None = None
"""``--sample-rss MS``: seconds between two samples of the run's VmRSS, None: not sampled."""
TRACE_TO: Path | None = None
"""``--tracemalloc DIR``: where the run's allocation profiles go (one file per run), None: not traced."""

_TRACER = """
import os, sys, threading, time, tracemalloc

def _profile(path, top=40):
    # The allocations alive now, by the line that made them, each time the traced total grows by a tenth: the
    # last profile written is the one nearest the peak.
    best = 0
    while True:
        time.sleep(1.0)
        current, peak = tracemalloc.get_traced_memory()
        if current < best * 1.1:
            continue
        best = current
        stats = tracemalloc.take_snapshot().statistics("lineno")
        lines = [f"traced now {current / 2**20:.1f} MB, peak {peak / 2**20:.1f} MB, at {time.monotonic():.1f}"]
        lines += [str(s) for s in stats[:top]]
        with open(path, "w") as f:
            f.write("\\n".join(lines) + "\\n")

if sys.argv[1:2] == ["run"]:
    import faulthandler, signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the benchmark asks when streams do not open

if sys.argv[1:2] == ["run"] and os.environ.get("KUBETRAIN_BENCH_TRACE_TO"):
    tracemalloc.start(4)
    threading.Thread(target=_profile, args=(os.environ["KUBETRAIN_BENCH_TRACE_TO"],), daemon=True).start()
"""
"""A sitecustomize for the measured run only (the benchmark's own instrument: nothing in kubetrain traces)."""


def _tracing_env(tmp: Path, to: Path | None) -> dict[str, str]:
    site = tmp / "trace-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_TRACER)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "KUBETRAIN_BENCH_TRACE_TO": str(to or "")}


VERB_REPEATS = 9
"""Each command is timed this many times, interleaved with the others (the median is kept): a load spike on a
shared machine then lands on one sample of each rather than on every sample of one."""


def time_verbs(kubeconfig: Path, env: dict[str, str], name: str) -> dict[str, Any]:
    """``kubetrain status``/``describe``/``list`` of the running job (each the whole command: interpreter, imports,
    requests) and the peer, ``kubectl get pods -l <the job's selector>`` for the same pods, in the same run.

    The emulator serves plain HTTP, and kubectl (client-go) sends a kubeconfig's credentials only to a TLS
    server, so it sends none here; the emulator serves requests without credentials, as the API server's
    plain-HTTP port did (a kubectl that could not talk to it leaves the peer's figure out, never a wrong one).
    kubetrain's modules are compiled first, as an installed kubetrain's are (:mod:`bytecode`).
    """
    k8s = ["--backend", "kubernetes", "--kubeconfig", str(kubeconfig)]
    commands: dict[str, list[str]] = {
        "status": [KUBETRAIN, "status", name, *k8s],
        "describe": [KUBETRAIN, "describe", name, *k8s],
        "list": [KUBETRAIN, "list", *k8s],
    }
    kubectl = shutil.which("kubectl")
    if kubectl:
        commands["kubectl"] = [kubectl, "--kubeconfig", str(kubeconfig), "get", "pods", "-l", f"{JOB_LABEL}={name}"]
    compile_kubetrain()
    samples: dict[str, list[float]] = {verb: [] for verb in commands}
    failed: set[str] = set()
    for _ in range(VERB_REPEATS):
        for verb, argv in commands.items():
            start = time.perf_counter()
            got = subprocess.run(argv, env=env, check=False, capture_output=True)
            samples[verb].append(time.perf_counter() - start)
            if got.returncode != 0:
                failed.add(verb)
                print(f"{verb} failed: {got.stderr.decode(errors='replace')[-500:]}", file=sys.stderr)
    out: dict[str, Any] = {f"{verb}_s": None if verb in failed else statistics.median(t) for verb, t in samples.items()}
    peer = out.get("kubectl_s")
    for verb in ("status", "describe", "list"):
        mine = out[f"{verb}_s"]
        out[f"{verb}_vs_kubectl"] = mine / peer if mine is not None and peer else None
    return out


def measure_scale(sizes: list[int], compare: bool) -> list[dict[str, Any]]:
    # The run measured is an installed kubetrain's, with its modules' bytecode: without it (an edited checkout
    # where PYTHONDONTWRITEBYTECODE is set) every start compiles the edited modules, a megabyte of RSS more.
    compile_kubetrain()
    rows = []
    with KubeEmulator() as emu, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        for n in sizes:
            for max_logs in ([None, n] if compare else [None]):
                emu.reset()
                emu.clear_requests()
                rows.append(attached_run(emu, kubeconfig, Path(tmp), n, max_logs))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _num(value: float | None, width: int, digits: int = 2) -> str:
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def print_scale(rows: list[dict[str, Any]]) -> None:
    print(f"{'replicas':>8} {'streams':>8} {'printed':>8} {'RSS MB':>7} {'threads':>8} {'files':>6} "
          f"{'running s':>10} {'written s':>10} {'1st line s':>11} {'all lines s':>12} {'failure→run s':>14}")
    for r in rows:
        print(f"{r['replicas']:>8} {r['max_log_requests']:>8} {r['printed']:>8} {r['rss_mb']:>7} {r['threads']:>8} "
              f"{r['files']:>6} {r['running_s']:>10.1f} {_num(r['written_s'], 10, 1)} {_num(r['first_line_s'], 11, 1)} "
              f"{_num(r['last_first_line_s'], 12, 1)} {r['failure_to_report_s']:>14.2f}")
    print("(from the command's start: running s, until the emulator had every pod Running with a line written;"
          " written s, until every followed replica's line was written; 1st/all lines s, until the first/every"
          " followed replica's line was printed by the run)")
    print_memory(rows)
    if not any("status_s" in r for r in rows):
        return  # --no-verbs
    print(f"\n{'replicas':>8} {'kubectl get pods s':>19} {'status s':>9} {'×':>5} {'describe s':>11} {'×':>5} "
          f"{'list s':>7} {'×':>5}   (× = the time over kubectl's, median of {VERB_REPEATS})")
    for r in rows:
        if "status_s" not in r:
            continue  # --no-verbs
        print(f"{r['replicas']:>8} {_num(r.get('kubectl_s'), 19)} {_num(r['status_s'], 9)} "
              f"{_num(r['status_vs_kubectl'], 5)} {_num(r['describe_s'], 11)} {_num(r['describe_vs_kubectl'], 5)} "
              f"{_num(r['list_s'], 7)} {_num(r['list_vs_kubectl'], 5)}")


def print_memory(rows: list[dict[str, Any]]) -> None:
    """The run's memory: once submitted (imports done, no replica held), its peak, the increment per 1,000
    replicas, and the goal's ratio: the peak at the largest size within 1.2x its peak at 1,000 replicas (the
    smallest size's when 1,000 was not measured)."""
    print(f"\n{'replicas':>8} {'streams':>8} {'submitted MB':>13} {'peak MB':>8} {'MB per 1,000':>13}"
          f"{'   sampled peak MB at s, after' if any('rss_peak_at_s' in r for r in rows) else ''}")
    for r in rows:
        base = r.get("submitted_rss_mb")
        per = (r["rss_mb"] - base) / (r["replicas"] / 1000) if base is not None else None
        peak = (f"   {r['rss_peak_sampled_mb']:>6.1f} {r['rss_peak_at_s']:>6.2f} {r['rss_peak_after']}"
                if "rss_peak_at_s" in r else "")
        print(f"{r['replicas']:>8} {r['max_log_requests']:>8} {_num(base, 13, 1)} {r['rss_mb']:>8} "
              f"{_num(per, 13, 2)}{peak}")
    for r in rows:
        if r.get("rss_marks"):
            marks = ", ".join(f"{what} {t:.2f}" for t, what in r["rss_marks"])
            print(f"  {r['replicas']} replicas, {r['max_log_requests']} streams, moments (s): {marks}")
    default = sorted((r for r in rows if not r.get("every_replica")), key=lambda r: r["replicas"])
    reference = [r for r in default if r["replicas"] == 1000] or default[:1]
    small, large = (reference[0], default[-1]) if default else (None, None)
    if small is not None and large is not None and large["replicas"] > small["replicas"]:
        ratio = large["rss_mb"] / small["rss_mb"]
        verdict = "met" if ratio <= 1.2 else "NOT met"
        print(f"peak RSS at {large['replicas']:,} replicas over {small['replicas']:,}: {ratio:.2f} "
              f"(goal: within 1.2: {verdict})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", default="10,100,1000", help="job lengths, comma-separated")
    parser.add_argument("--repeats", type=int, default=10, help="latency samples per flavor")
    parser.add_argument("--flavors", default=",".join(FLAVORS))
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.add_argument("--scale", metavar="N,N", help="instead: an attached run of N replicas (e.g. 100,1000)")
    parser.add_argument("--compare", action="store_true", help="with --scale: also with every replica followed")
    parser.add_argument("--tracemalloc", metavar="DIR", type=Path,
                        help="with --scale: profile the run's allocations (tracemalloc, slow) into DIR, a file a run")
    parser.add_argument("--no-verbs", action="store_true", help="with --scale: leave status/describe/list untimed")
    parser.add_argument("--sample-rss", metavar="MS", type=float,
                        help="with --scale: sample the run's VmRSS every MS ms and say when its peak happened")
    args = parser.parse_args(argv)
    global TRACE_TO, TIME_VERBS, SAMPLE_RSS
    TIME_VERBS = not args.no_verbs
    SAMPLE_RSS = args.sample_rss / 1000 if args.sample_rss else None
    if args.tracemalloc is not None:
        TRACE_TO = args.tracemalloc.resolve()
        TRACE_TO.mkdir(parents=True, exist_ok=True)
    if args.scale:
        rows = measure_scale([int(x) for x in args.scale.split(",") if x], args.compare)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print_scale(rows)
        return 0
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
