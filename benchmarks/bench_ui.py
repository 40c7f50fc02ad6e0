"""The web view's numbers: how fast a change reaches a page, how fast pages load with a big store, and
what ten viewers cost the server; measured at the server's event streams and in a real browser.

    .venv/bin/python benchmarks/bench_ui.py

The server (`kubetrain ui`) runs as a process of its own over a store of 1,000+ jobs, one of them a job
with 10,000 log lines (two replicas of 5,000, really run).

At the server (HTTP and server-sent events over sockets):
- latency: a replica's phase written to the job store (as the supervisor writes it) → the job page's event
  stream delivering it. 30 changes, median and max.
- load: the jobs table (GET /content) and the big job's page (its content's HTML), then its log stream to
  its last line.
- memory: the server's RSS idle and with 10 viewers, each holding the jobs table's stream and a job page's
  one stream (status, metrics and log together) open: 20 event streams.

In Debian's headless chromium through selenium (skipped, saying why, where it is not installed), with the
recorder of benchmarks/browser_timing.py timing what the DOM shows:
- latency: a real local job of 20 replicas, each waiting on a FIFO gate of its own; the benchmark opens the
  gates one by one, and each replica's exit (recorded by its supervisor, which stamps `finished_at` as it
  commits Succeeded) is timed to the moment the page's replica grid cell shows Succeeded. Also from the gate's
  opening (the whole path: exit, supervisor, store, server, browser).
- load: the jobs table's page ready with 1,000 jobs (its first page shown, sorted, with its pager, and its
  first live update rendered), and Navigation Timing (responseEnd, domContentLoaded, load) of the jobs table
  and of the big job's page (the layout, which holds no job data), the time until the content (fetched with
  the token) is shown, until the log view shows its 10,000th line.
- memory: the server's RSS with 10 tabs of one browser (5 on the jobs table, 5 on the big job's page); a tab
  in the background gives up its stream, so all of them load despite the browser's 6 connections per host.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import browser_timing  # noqa: E402  (beside this file)

from tests.ui.helpers import TOKEN, free_port  # noqa: E402 (the helpers present TOKEN on every request)

LATENCY_REPLICAS = 20
PAGE_LOADS = 3
TABS = 10

# A replica of the latency job: waits on its FIFO gate (opening it blocks until the benchmark opens it for
# writing), then exits 0. No imports beyond the standard library: twenty of them start at once.
GATED = "import os, sys; open(sys.argv[1] + '-' + os.environ['KUBETRAIN_REPLICA_INDEX']).read()"


def stage(name: str, since: float) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[{time.monotonic() - since:5.1f} s] {name}", file=sys.stderr, flush=True)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} ms, max {max(values):.0f} ms"


def first_then(values: list[float]) -> str:
    """The first of a page's loads, then the median of the rest (later loads reuse the server's rows and
    the browser's cached script and style)."""
    return f"{values[0]:.0f} ms, then {statistics.median(values[1:]):.0f} ms"


def start_server(port: int) -> subprocess.Popen[str]:
    from tests.ui.helpers import request

    server = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KUBETRAIN_UI_TOKEN": TOKEN},
    )
    assert server.stdout is not None
    server.stdout.readline()  # "serving ... at URL": printed once the port is bound
    deadline = time.monotonic() + 30
    while True:
        try:
            request(f"http://127.0.0.1:{port}/api/jobs")
            return server
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.terminate()
                raise
            time.sleep(0.05)  # the port is not open yet: nothing to wait on but a retry


def server_side(url: str, store: Any, big: str, target: str, pid: int, rows: list[tuple[str, str]]) -> None:
    from kubetrain.status import ReplicaPhase
    from tests.ui.helpers import Events, request

    def timed(path: str, n: int = 5) -> list[float]:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            reply = request(url + path)
            times.append((time.perf_counter() - t) * 1000)
            assert reply.status == 200
        return times

    rows.append(("jobs table, 1,000 jobs: GET /content", first_then(timed("/content"))))
    rows.append(("job page, 10,000 log lines: GET .../content (HTML)", first_then(timed(f"/jobs/local/{big}/content"))))
    t = time.perf_counter()
    count = 0
    with Events(f"{url}/jobs/local/{big}/events") as logs:  # the page's one stream: status, metrics, log
        for event, data in logs:
            if event == "lines":
                count += len(data)
            if event == "end":
                break
    assert count == 10_000, count
    rows.append(("  its log stream, to the last of 10,000 lines", f"{(time.perf_counter() - t) * 1000:.0f} ms"))

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
    rows.append(("phase written → job page's event (30 changes)", ms(delays)))

    before = rss_mb(pid)
    viewers = []
    for _ in range(10):
        viewers.append(Events(url + "/events"))
        viewers.append(Events(f"{url}/jobs/local/{big}/events?tail=1000"))
    for v in viewers:  # each has had its first event: the server holds its stream
        next(iter(v))
    with_viewers = rss_mb(pid)
    for v in viewers:
        v.close()
    rows.append(("server RSS idle", f"{before:.1f} MB"))
    rows.append(("server RSS, 10 viewers (20 event streams: jobs table + job page)", f"{with_viewers:.1f} MB"))


def gated_job(backend: Any, directory: Path, replicas: int) -> tuple[str, Callable[[int], None]]:
    """A running local job whose replica i exits 0 when `open_gate(i)` is called; its id and open_gate."""
    from kubetrain.jobspec import from_dict

    gate = directory / "gate"
    for i in range(replicas):
        os.mkfifo(f"{gate}-{i}")
    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "gated"},
        "spec": {
            "framework": "generic",
            "replicas": replicas,
            "run": {"exec": [sys.executable, "-c", GATED, str(gate)]},
        },
    }
    job_id = backend.run(from_dict(doc), detach=True).job_id

    def open_gate(i: int) -> None:
        os.close(os.open(f"{gate}-{i}", os.O_WRONLY))  # returns once replica i waits there; it then reads EOF

    return job_id, open_gate


def in_browser(url: str, backend: Any, directory: Path, big: str, rows: list[tuple[str, str]]) -> None:
    with browser_timing.chromium() as browser:
        # Latency: a real job's replicas end one at a time; the page's grid shows each.
        job_id, open_gate = gated_job(backend, directory, LATENCY_REPLICAS)
        browser.open(f"{url}/jobs/local/{job_id}#token={TOKEN}")  # the page keeps the token for this origin
        offset = browser.clock_offset()
        for i in range(LATENCY_REPLICAS):
            browser.wait_mark(f"replica worker-{i} Running")
        opened, shown = [], []
        for i in range(LATENCY_REPLICAS):
            opened.append(time.time())
            open_gate(i)
            shown.append(browser.wait_mark(f"replica worker-{i} Succeeded"))
        replicas = {r.index: r for r in backend.status(job_id).replicas}
        committed = [replicas[i].finished_at for i in range(LATENCY_REPLICAS)]
        assert all(c is not None for c in committed), committed
        rows.append(
            (
                f"replica Succeeded committed → grid cell shows it ({LATENCY_REPLICAS} changes)",
                ms([(s - c) * 1000 for s, c in zip(shown, committed, strict=True)]),
            )
        )
        rows.append(
            (
                "  from the replica's gate opened (exit → supervisor → page)",
                ms([(s - o) * 1000 for s, o in zip(shown, opened, strict=True)]),
            )
        )
        rows.append(("  page clock − Python clock (a check of the above)", f"{offset[0]:+.1f} ms ± {offset[1]:.1f} ms"))

        # Loads: the big job's page to its last log line; the jobs table to its first live update.
        loads: dict[str, list[float]] = {}
        for _ in range(PAGE_LOADS):
            start = browser.open(f"{url}/jobs/local/{big}")
            nav = browser.navigation()
            content = browser.wait_mark("content")
            last = browser.wait_mark("log 10000 lines")
            for key, value in (
                ("page response", nav.response_end),
                ("page dcl", nav.dom_content_loaded),
                ("page load", nav.load),
                ("page content", (content - start) * 1000),
                ("page log", (last - start) * 1000),
            ):
                loads.setdefault(key, []).append(value)
        for _ in range(PAGE_LOADS):
            start = browser.open(url + "/")
            nav = browser.navigation()
            content = browser.wait_mark("content")
            live = browser.wait_mark("jobs live")
            shown_rows = browser.driver.execute_script("return document.querySelector('#jobs tbody').childElementCount")
            counted = browser.driver.execute_script("return document.getElementById('count').textContent")
            assert int(counted) > 1000 and shown_rows == 50, (counted, shown_rows)  # the first page of 50
            for key, value in (
                ("table response", nav.response_end),
                ("table dcl", nav.dom_content_loaded),
                ("table load", nav.load),
                ("table content", (content - start) * 1000),
                ("table live", (live - start) * 1000),
            ):
                loads.setdefault(key, []).append(value)
        ready = f"browser: page ready with {int(counted):,} jobs (first page of {shown_rows} rows shown, live)"
        rows.append((ready, first_then(loads["table live"])))
        rows.append(("  responseEnd (layout)", first_then(loads["table response"])))
        rows.append(("  domContentLoaded", first_then(loads["table dcl"])))
        rows.append(("  load", first_then(loads["table load"])))
        rows.append(("  content shown (fetched with the token)", first_then(loads["table content"])))
        rows.append(("browser: job page, 10,000 log lines: responseEnd (layout)", first_then(loads["page response"])))
        rows.append(("  domContentLoaded", first_then(loads["page dcl"])))
        rows.append(("  load", first_then(loads["page load"])))
        rows.append(("  content shown (fetched with the token)", first_then(loads["page content"])))
        rows.append(("  log view shows its last line", first_then(loads["page log"])))


def tabs_rss(url: str, big: str, pid: int, rows: list[tuple[str, str]]) -> None:
    """The server's RSS with TABS tabs of one browser open, half on the jobs table, half on the big job's page.

    Chromium opens at most 6 HTTP/1.1 connections to one host across all of its tabs: a page holds one
    event stream, and a tab in the background gives it up (reopened when shown), so every tab loads."""
    before = rss_mb(pid)
    with browser_timing.chromium() as browser:
        for n in range(TABS):
            table = n % 2 == 0
            target = url + "/" if table else f"{url}/jobs/local/{big}"
            if n == 0:
                browser.open(target + f"#token={TOKEN}")  # the page keeps the token for this origin
            else:
                browser.new_tab(target)
            browser.wait_mark("jobs live" if table else "log end")
        label = f"server RSS with {TABS} tabs of one browser (idle before: {before:.1f} MB)"
        rows.append((label, f"{rss_mb(pid):.1f} MB"))


def main() -> int:
    started = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="kubetrain-bench-ui-"))
    os.environ["KUBETRAIN_HOME"] = str(directory / "home")
    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict

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

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    rows: list[tuple[str, str]] = []
    server = start_server(port)
    try:
        stage("server up; measuring at the server", started)
        server_side(url, store, big, target, server.pid, rows)
        missing = browser_timing.available()
        if missing is None:
            stage("measuring in chromium", started)
            in_browser(url, backend, directory, big, rows)
            stage(f"{TABS} browser tabs", started)
            tabs_rss(url, big, server.pid, rows)
        else:
            rows.append(("browser measurements", f"skipped ({missing})"))
    finally:
        server.terminate()
        server.wait(10)
        backend.close()

    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"(benchmark took {time.monotonic() - started:.0f} s; the server looks at the store every 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
