"""Metric plots: every metric name a script can log plots over HTTP at the address the job page gives it
(names with `/`, `?`, `#`, `%`, spaces or a newline included), and the y axis on a log scale leaves out the
samples it cannot show and says how many."""

from __future__ import annotations

import html
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.metrics import MetricSample
from kubetrain.status import JobPhase
from kubetrain.ui import svg
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind, wait_phase  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import Events, request

NAMES = ["eval/loss", "a b#%?", "a?b", "line\nbreak", "100%", "x&y=1"]
"""Names a path segment cannot hold as they are, each logged for five steps."""

# Logs five steps of every name, then waits at a gate (a FIFO: opening it blocks until the test opens it for
# writing), so the job is still running, and its metrics followed, while the test looks at its page.
SCRIPT = """
import sys
import kubetrain.metrics as m
names = {names!r}
for step in range(5):
    m.log(step=step, **{{n: (i + 1) * 10.0 ** -step for i, n in enumerate(names)}})
open(sys.argv[1]).read()
"""

IMG = re.compile(r'<img class="plot" data-metric="([^"]*)" alt="[^"]*" data-src="([^"]*)">')
NS = {"svg": "http://www.w3.org/2000/svg"}


def metrics_job(local: LocalBackend, tmp: Path) -> tuple[str, Path]:
    """A running job that has logged every name of NAMES, and the gate that lets it end."""
    script, gate = tmp / "metrics.py", tmp / "gate"
    script.write_text(SCRIPT.format(names=NAMES))
    os.mkfifo(gate)
    job = exec_job([sys.executable, str(script), str(gate)], "names")
    return local.run(job, detach=True).job_id, gate


def open_gate(gate: Path) -> None:
    os.close(os.open(gate, os.O_WRONLY))  # returns once the replica waits there


def parse(body: str) -> ET.Element:
    return ET.fromstring(body)


def series_points(root: ET.Element) -> list[int]:
    return [int(p.get("data-points", "0")) for p in root.iterfind(".//svg:polyline[@class='series']", NS)]


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iterfind(".//svg:text", NS)]


def test_every_metric_name_plots_at_the_address_the_page_gives(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    job_id, gate = metrics_job(local, tmp_path)
    href = f"{server.url}/jobs/local/{job_id}"
    with Events(href + "/events") as events:  # until the view has read every sample
        events.until("metrics", lambda d: d["names"] == sorted(NAMES) and d["samples"] == 5 * len(NAMES))
    page = request(href + "/content")
    assert page.status == 200
    imgs = {html.unescape(name): html.unescape(src) for name, src in IMG.findall(page.body)}
    assert sorted(imgs) == sorted(NAMES), page.body
    for name, src in imgs.items():
        query = parse_qs(urlsplit(src).query)
        assert query["name"] == [name] and query["scale"] == ["linear"], src
        for scale in ("linear", "log"):
            plot = request(server.url + src.replace("scale=linear", f"scale={scale}"))
            assert plot.status == 200 and plot.headers["content-type"].startswith("image/svg+xml"), (name, plot.body)
            root = parse(plot.body)
            assert series_points(root) == [5], (name, scale, plot.body)
            title = root.findtext("svg:title", namespaces=NS)
            assert title == f"{name} by step" + (", log scale" if scale == "log" else "")
    open_gate(gate)
    wait_phase(job_id, JobPhase.SUCCEEDED)


def test_unknown_or_missing_metric_name(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    job_id, _gate = metrics_job(local, tmp_path)  # left at its gate: the fixture cancels it
    href = f"{server.url}/jobs/local/{job_id}/plot.svg"
    unknown = request(href + "?name=nope&x=step")
    assert unknown.status == 200
    root = parse(unknown.body)
    assert series_points(root) == [] and "no samples yet" in texts(root)
    for query in ("", "?x=step", "?name="):
        missing = request(href + query)
        assert missing.status == 400 and "name" in missing.json()["error"], query


def sample(step: int, value: float, rank: int = 0) -> MetricSample:
    return MetricSample(name="loss", value=value, step=step, time=1000.0 + step, role="worker", index=0, rank=rank)


def ys(root: ET.Element) -> list[float]:
    line = root.find(".//svg:polyline[@class='series']", NS)
    assert line is not None
    return [float(pair.split(",")[1]) for pair in (line.get("points") or "").split()]


def test_log_scale_places_decades_evenly_and_labels_values() -> None:
    samples = [sample(0, 1.0), sample(1, 10.0), sample(2, 100.0)]
    top, bottom = svg.MARGIN_TOP, svg.HEIGHT - svg.MARGIN_BOTTOM
    log = parse(svg.plot(samples, "loss", scale="log"))
    assert ys(log) == [bottom, (top + bottom) / 2, top]  # one decade each: evenly spaced
    assert "100" in texts(log) and "1" in texts(log)  # the axis' extremes in the metric's units
    assert not any("not shown" in t for t in texts(log))
    linear = parse(svg.plot(samples, "loss"))
    assert ys(linear)[1] > (top + bottom) / 2 + 50  # 10 sits near the bottom of a linear axis from 1 to 100


def test_log_scale_leaves_out_samples_at_or_below_zero_and_says_how_many() -> None:
    samples = [sample(0, -1.0), sample(1, 0.0), sample(2, 0.5), sample(3, 5.0), sample(0, 0.0, rank=1)]
    root = parse(svg.plot(samples, "loss", scale="log"))
    assert series_points(root) == [2]  # rank 1 had nothing to draw: no line, no legend entry
    assert "3 samples <= 0 not shown" in texts(root)
    assert not any(t.startswith("rank 1") for t in texts(root))
    linear = parse(svg.plot(samples, "loss", scale="linear"))
    assert sorted(series_points(linear)) == [1, 4] and not any("not shown" in t for t in texts(linear))


@pytest.mark.parametrize("values", [[0.0, -2.0, 0.0], [-1e-9]])
def test_log_scale_with_no_sample_above_zero_says_so_instead_of_a_plot(values: list[float]) -> None:
    root = parse(svg.plot([sample(i, v) for i, v in enumerate(values)], "loss", scale="log"))
    assert series_points(root) == []
    said = "1 sample" if len(values) == 1 else f"all {len(values)} samples"
    assert f"{said} <= 0: none can be shown on a log scale" in texts(root)


def test_an_ended_jobs_page_comes_with_its_plots(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    """The first page of a job that has ended holds its plots as served, not only after its stream's first
    event (nothing follows an ended job's metrics)."""
    job_id, gate = metrics_job(local, tmp_path)
    open_gate(gate)
    wait_phase(job_id, JobPhase.SUCCEEDED)
    page = request(f"{server.url}/jobs/local/{job_id}/content")
    assert sorted(html.unescape(name) for name, _src in IMG.findall(page.body)) == sorted(NAMES)
