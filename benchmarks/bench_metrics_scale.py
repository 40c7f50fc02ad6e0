"""The web view with many metrics: what one plot costs the server, and how long all of a job's plots take.

    .venv/bin/python benchmarks/bench_metrics_scale.py [--metrics 1000] [--steps 2000] [--plots all|N]
    .venv/bin/python benchmarks/bench_metrics_scale.py --metrics 10000 --steps 5 --plots 0 --quick

A real local job logs `--metrics` metrics for `--steps` steps (one `kubetrain.metrics.log` call per step,
2,000,000 samples by default) and ends; `kubetrain ui` then serves it as a process of its own. Measured at
the server, over sockets, with the token:
- the job's page (`/content`, which reads the job's metrics once) in ms;
- a plot (`plot.svg`) and a metric's data (`metrics?name=`): the server's CPU per request (utime + stime of
  its process, from /proc) and the wall time, the median over 20 different metrics;
- every plot of the job (`--plots all`) fetched by 6 clients at once (a browser's connections per host): the
  wall time until the last one has arrived, and the server's CPU for them;
- the server's RSS after all of it.

In Debian's headless chromium (skipped, saying why, where it is not installed), on a new server: the job's
page opened until the pictures in its first view are drawn, then every picture scrolled into view in turn,
each waited for until drawn: the time until all of them have been shown. Then a job of 4 replicas logging
`--points` steps each (100,000): its interactive plot opened (the metric's data fetched and drawn by uPlot),
and hovered (the cursor moved and every line's value written in the legend): the mean of 200 moves.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_ui import rss_mb, stage, start_server  # noqa: E402  (beside this file)

from tests.ui.helpers import AUTH, Reply, free_port  # noqa: E402

LOGGER = """
import sys
import kubetrain.metrics as m
metrics, steps = int(sys.argv[1]), int(sys.argv[2])
names = [f"layer{i // 10}/metric{i}" for i in range(metrics)]
for step in range(steps):
    m.log(step=step, **{n: (i + 1) / (step + 1) for i, n in enumerate(names)})
"""


def request(url: str) -> Reply:
    """GET with the token, waiting as long as a loaded machine needs (the tests' `request` gives up at 60 s)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=900)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}" if parts.query else parts.path, headers=AUTH)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


DRAWN = "return [...document.querySelectorAll('#metrics img.plot')].map(i => i.src.startsWith('blob:'))"
IN_VIEW = """
return [...document.querySelectorAll('#metrics img.plot')].filter(i => {
  const r = i.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight;
}).every(i => i.src.startsWith('blob:'))
"""


def until(driver: Any, what: str, test: Callable[[Any], Any]) -> Any:
    """As the tests' `until`, with a bound for a loaded machine (2,000,000 samples are read first)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 600).until(test, message=what)


def in_browser(port: int, job: str, rows: list[tuple[str, str]], scroll: bool = True) -> None:
    from tests.support.browser import headless_chromium
    from tests.ui.helpers import TOKEN

    server = start_server(port)
    try:
        with headless_chromium() as driver:
            t = time.perf_counter()
            driver.get(f"http://127.0.0.1:{port}/jobs/local/{job}#token={TOKEN}")
            until(driver, "the pictures", lambda d: len(d.execute_script(DRAWN)) > 0 and d.execute_script(IN_VIEW))
            rows.append(("browser: page opened, its first view of plots drawn", f"{time.perf_counter() - t:.1f} s"))
            count = len(driver.execute_script(DRAWN))
            if not scroll:
                return
            for i in range(count):
                driver.execute_script(
                    "document.querySelectorAll('#metrics img.plot')[arguments[0]].scrollIntoView()", i
                )
                until(driver, f"picture {i}", lambda d: d.execute_script(IN_VIEW))
            drawn = sum(driver.execute_script(DRAWN))
            rows.append(
                (
                    f"browser: all {count} plots shown (each scrolled to)",
                    f"{time.perf_counter() - t:.1f} s, {drawn} drawn",
                )
            )
    finally:
        server.terminate()
        server.wait(10)


BIG = """
import os, math
import kubetrain.metrics as m
i = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
for step in range({points}):
    m.log(step=step, loss=math.exp(-step / {points}) + i * 0.1 + 0.01 * math.sin(step))
"""


def big_job(directory: Path, points: int) -> dict[str, object]:
    script = directory / "big.py"
    script.write_text(BIG.format(points=points))
    return {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "big-plot"},
        "spec": {"framework": "generic", "replicas": 4, "run": {"exec": [sys.executable, str(script)]}},
    }


HOVER = """
const u = document.getElementById('explore-plot').uplot, seen = new Set();
const t = performance.now();
for (let k = 0; k < 200; k++) {
  u.setCursor({left: 20 + (k * 37) % (u.bbox.width / devicePixelRatio - 40), top: 50});
  seen.add([...document.querySelectorAll('#explore-plot .u-legend .u-value')].map(e => e.textContent).join());
}
return [(performance.now() - t) / 200, u.data[0].length, u.series.length - 1, seen.size];
"""


def interactive(port: int, job: str, points: int, rows: list[tuple[str, str]]) -> None:
    from tests.support.browser import headless_chromium
    from tests.ui.helpers import TOKEN

    server = start_server(port)
    try:
        with headless_chromium() as driver:
            driver.get(f"http://127.0.0.1:{port}/jobs/local/{job}#token={TOKEN}")
            until(driver, "the picture", lambda d: d.find_elements("css selector", "#metrics img.plot"))
            t = time.perf_counter()
            driver.execute_script("document.querySelector('#metrics img.plot').click()")
            until(driver, "the plot", lambda d: d.find_elements("css selector", "#explore-plot[data-loaded] .u-over"))
            opened = time.perf_counter() - t
            hover, xs, lines, legends = driver.execute_script(HOVER)
            rows.append(
                (
                    f"interactive plot, 4 ranks x {points} points: opened",
                    f"{opened * 1000:.0f} ms ({lines} lines, {xs} x values after the server's thinning)",
                )
            )
            rows.append(
                ("interactive plot: a hover (cursor moved, legend written)", f"{hover:.2f} ms ({legends} legends seen)")
            )
    finally:
        server.terminate()
        server.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--plots", default="all", help="how many plots to fetch in the 'every plot' round")
    parser.add_argument("--points", type=int, default=100_000, help="steps per rank of the interactive plot's job")
    parser.add_argument("--quick", action="store_true", help="in chromium, the first view only (10,000 metrics)")
    args = parser.parse_args()
    started = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="kubetrain-bench-metrics-"))
    os.environ["KUBETRAIN_HOME"] = str(directory / "home")
    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict

    backend = LocalBackend(preload=())
    script = directory / "logger.py"
    script.write_text(LOGGER)
    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "many-metrics"},
        "spec": {
            "framework": "generic",
            "replicas": 1,
            "run": {"exec": [sys.executable, str(script), str(args.metrics), str(args.steps)]},
        },
    }
    job = backend.run(from_dict(doc)).job_id
    stage(f"job {job} logged {args.metrics} metrics x {args.steps} steps", started)
    names = [f"layer{i // 10}/metric{i}" for i in range(args.metrics)]

    port = free_port()
    href = f"http://127.0.0.1:{port}/jobs/local/{job}"
    rows: list[tuple[str, str]] = []
    server = start_server(port)
    try:
        pid = server.pid
        t0, c0 = time.perf_counter(), cpu_seconds(pid)
        page = request(href + "/content")
        assert page.status == 200, page.body[:300]
        rows.append(
            (
                "job page (reads the metrics once)",
                f"{(time.perf_counter() - t0) * 1000:.0f} ms, server CPU {cpu_seconds(pid) - c0:.2f} s",
            )
        )

        def one(path: str) -> tuple[float, float]:
            t, c = time.perf_counter(), cpu_seconds(pid)
            answer = request(path)
            assert answer.status == 200, answer.body[:300]
            return time.perf_counter() - t, cpu_seconds(pid) - c

        for what, route in (("plot", "plot.svg"), ("metric data (JSON)", "metrics")):
            if request(f"{href}/{route}?" + urlencode({"name": names[0]})).status != 200:
                rows.append((f"one {what}", "not served"))
                continue
            probe = [one(f"{href}/{route}?" + urlencode({"name": names[i * 37 % len(names)]})) for i in range(20)]
            wall = statistics.median(w for w, _ in probe) * 1000
            cpu = statistics.median(c for _, c in probe) * 1000
            rows.append((f"one {what}: server CPU, wall (median of 20)", f"{cpu:.0f} ms CPU, {wall:.0f} ms"))

        count = len(names) if args.plots == "all" else int(args.plots)
        stage(f"fetching {count} plots, 6 at a time", started)
        t, c = time.perf_counter(), cpu_seconds(pid)
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(one, [f"{href}/plot.svg?" + urlencode({"name": n}) for n in names[:count]]))
        rows.append(
            (f"{count} plots, 6 at a time", f"{time.perf_counter() - t:.1f} s, server CPU {cpu_seconds(pid) - c:.1f} s")
        )
        rows.append(("server RSS", f"{rss_mb(pid):.0f} MB"))
    finally:
        server.terminate()
        server.wait(10)
    import browser_timing

    missing = browser_timing.available()
    try:
        if missing is None:
            stage("in chromium", started)
            in_browser(port, job, rows, scroll=not args.quick)
            if not args.quick:
                big = backend.run(from_dict(big_job(directory, args.points))).job_id
                stage(f"job {big}: 4 ranks x {args.points} points", started)
                interactive(port, big, args.points, rows)
        else:
            rows.append(("browser measurements", f"skipped ({missing})"))
    finally:
        backend.close()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
