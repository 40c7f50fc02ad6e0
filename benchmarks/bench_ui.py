"""The web view's numbers: how fast a change reaches a page, how fast pages load with a big store, and
what ten viewers cost the server.

    .venv/bin/python benchmarks/bench_ui.py

- latency: a replica's phase written to the job store (as the supervisor writes it) → the job page's
  event stream delivering it (the browser then sets a text node). 30 changes, median and max.
- load: 1,000 jobs in the store → the jobs table (GET /); a job with 10,000 log lines → its page, and its
  log stream to its last line.
- memory: the server (`kubetrain ui`, a process of its own) before and with 10 viewers, each holding the
  jobs table's, the job page's and the log stream open.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="kubetrain-bench-ui-")) / "home"
    os.environ["KUBETRAIN_HOME"] = str(home)
    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict
    from kubetrain.status import ReplicaPhase
    from tests.ui.helpers import Events, request

    backend = LocalBackend(preload=())
    store = backend.store
    # A job of 10,000 lines (two replicas of 5,000), really run.
    lines = "for i in range(5000): print(f'step {i} loss {1/(i+1):.6f} some more text to make a typical line')"
    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "big-log"},
        "spec": {"framework": "generic", "replicas": 2, "run": {"exec": [sys.executable, "-c", lines]}},
    }
    big = backend.run(from_dict(doc)).job_id
    # 1,000 jobs in the store (recorded as `run` records them; not started).
    spec = json.dumps(
        {
            "apiVersion": "kubetrain.dev/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "j"},
            "spec": {"framework": "pytorch", "replicas": 2},
        }
    )
    for n in range(999):
        store.create_job(f"job{n}", "local", spec, None, [("worker", 0), ("worker", 1)])
    target = store.create_job("latency", "local", spec, None, [("worker", 0), ("worker", 1)])

    port = 18265
    server = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "serving ... at URL": uvicorn binds right after
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                request(url + "/api/jobs")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

        def timed(path: str, n: int = 5) -> tuple[float, float]:
            """(the first load, the median of `n`): later loads reuse the rows computed for this store version."""
            times = []
            for _ in range(n):
                t = time.perf_counter()
                reply = request(url + path)
                times.append(time.perf_counter() - t)
                assert reply.status == 200
            return times[0] * 1000, statistics.median(times) * 1000

        table_ms = timed("/")
        page_ms = timed(f"/jobs/local/{big}")
        t = time.perf_counter()
        count = 0
        with Events(f"{url}/jobs/local/{big}/logs") as logs:
            for event, data in logs:
                if event == "lines":
                    count += len(data)
                if event == "end":
                    break
        logs_ms = (time.perf_counter() - t) * 1000
        assert count == 10_000, count

        # Latency: a replica's phase written to the store → the job page's stream says it.
        delays = []
        with Events(f"{url}/jobs/local/{target}/events") as events:
            stream = iter(events)
            next(e for e in stream if e[0] == "status")
            phases = [ReplicaPhase.RUNNING, ReplicaPhase.PENDING]
            for n in range(30):
                phase = phases[n % 2]
                t = time.perf_counter()
                store.update_replica(target, "worker", 1, phase=phase)
                for event, data in stream:
                    if event == "status" and data["replicas"][1]["phase"] == phase.value:
                        delays.append((time.perf_counter() - t) * 1000)
                        break

        before = rss_mb(server.pid)
        viewers = []
        for _ in range(10):
            viewers.append(Events(url + "/events"))
            viewers.append(Events(f"{url}/jobs/local/{target}/events"))
            viewers.append(Events(f"{url}/jobs/local/{big}/logs?tail=1000"))
        for v in viewers:  # each has had its first event: the server holds its stream
            next(iter(v))
        with_viewers = rss_mb(server.pid)
        for v in viewers:
            v.close()
    finally:
        server.terminate()
        server.wait(10)
        backend.close()

    print(
        f"phase change → page event: median {statistics.median(delays):.0f} ms, max {max(delays):.0f} ms "
        f"(30 changes; data_version looked at every 100 ms)"
    )
    print(f"jobs table, 1,000 jobs: first {table_ms[0]:.0f} ms, then {table_ms[1]:.0f} ms (GET /)")
    print(
        f"job page, 10,000 log lines: first {page_ms[0]:.0f} ms, then {page_ms[1]:.0f} ms (HTML); "
        f"the whole log streamed: {logs_ms:.0f} ms"
    )
    print(f"server RSS: {before:.1f} MB idle → {with_viewers:.1f} MB with 10 viewers (30 event streams)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
