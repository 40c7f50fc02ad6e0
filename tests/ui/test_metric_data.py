"""A metric's data over HTTP: a plot or a download reads its own metric only (a job may log thousands), the
CSV and JSON downloads are what `kubetrain metrics ID -o csv|json` gives for that metric, and a restarted
job's samples come as a line per attempt."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.metrics import MetricSample
from kubetrain.ui import app as app_module
from kubetrain.ui import plot_data
from kubetrain.ui.metrics_tracker import Samples
from kubetrain.ui.server import Background
from tests.support.helpers import cli, exec_job, make_job, no_process_left_behind  # noqa: F401 (autouse)
from tests.ui.helpers import request

NAMES = [f"group{i // 5}/metric{i}" for i in range(40)] + ['a,b "quoted"', "eval/loss", "损失"]
LOGGER = f"""
import kubetrain.metrics as m
names = {NAMES!r}
for step in range(6):
    m.log(step=step, **{{n: (i + 1) / (step + 1) for i, n in enumerate(names)}})
m.log(step=6, **{{"eval/loss": float("nan")}})
"""


@pytest.fixture
def ended_job(local: LocalBackend, tmp_path: Path) -> str:
    script = tmp_path / "logger.py"
    script.write_text(LOGGER)
    return local.run(exec_job([sys.executable, str(script)], "many")).job_id


def test_a_plot_reads_the_jobs_metrics_once_and_draws_from_its_own_metric_only(
    server: Background, local: LocalBackend, ended_job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real_metrics = local.metrics

    def counted(job_id: str, *, follow: bool = False) -> Iterator[MetricSample]:
        reads.append(job_id)
        return real_metrics(job_id, follow=follow)

    drawn: list[list[Any]] = []
    real_plot = app_module.svg.plot

    def seen(samples: list[Any], *args: Any) -> str:
        drawn.append(list(samples))
        return real_plot(samples, *args)

    monkeypatch.setattr(local, "metrics", counted)
    monkeypatch.setattr(app_module.svg, "plot", seen)
    href = f"{server.url}/jobs/local/{ended_job}"
    for name in [*NAMES[:3], "eval/loss"]:  # no page opened first: the plots alone
        answer = request(f"{href}/plot.svg?" + urlencode({"name": name}))
        assert answer.status == 200, answer.body
    assert reads == [ended_job]  # the job's metrics read once, for every plot after
    assert [len(samples) for samples in drawn] == [6, 6, 6, 7]
    assert [{s.name for s in samples} for samples in drawn] == [{n} for n in [*NAMES[:3], "eval/loss"]]


def test_csv_and_json_downloads_are_what_the_cli_gives_for_that_metric(server: Background, ended_job: str) -> None:
    href = f"{server.url}/jobs/local/{ended_job}/metrics?"
    every_csv = list(csv.reader(io.StringIO(cli("metrics", ended_job, "-o", "csv").stdout)))
    every_json = json.loads(cli("metrics", ended_job, "-o", "json").stdout)
    for name in ("eval/loss", 'a,b "quoted"', "损失"):
        got = request(href + urlencode({"name": name, "format": "csv"}))
        assert got.status == 200 and got.headers["content-type"].startswith("text/csv")
        assert "attachment" in got.headers["content-disposition"]
        rows = list(csv.reader(io.StringIO(got.body)))
        assert rows[0] == every_csv[0] == ["time", "step", "name", "value", "role", "index", "rank"]
        assert rows[1:] == [r for r in every_csv[1:] if r[2] == name]
        assert len(rows) == 1 + (7 if name == "eval/loss" else 6)
        got_json = request(href + urlencode({"name": name, "format": "json"})).json()
        assert got_json == [s for s in every_json if s["name"] == name]


def test_a_metrics_format_it_does_not_know_is_refused(server: Background, ended_job: str) -> None:
    href = f"{server.url}/jobs/local/{ended_job}/metrics?"
    assert request(href + urlencode({"name": "eval/loss", "format": "xml"})).status == 400
    assert request(href + urlencode({"format": "csv"})).status == 400
    assert request(f"{server.url}/jobs/local/nope/metrics?name=x").status == 404


def sample(step: int | None, t: float, rank: int = 0, value: float = 1.0) -> MetricSample:
    return MetricSample(name="loss", value=value, step=step, time=t, role="worker", index=0, rank=rank)


def test_a_series_whose_step_goes_back_is_a_new_attempt() -> None:
    first = [sample(s, 100.0 + s) for s in range(1, 16)]
    second = [sample(s, 200.0 + s) for s in range(1, 21)]
    other = [sample(s, 100.5 + s, rank=1) for s in range(1, 4)]
    lines = plot_data.plot_series([*second, *other, *first])  # in any order: sorted by time per series
    assert [(ln["label"], ln["attempt"], ln["attempts"], len(ln["step"])) for ln in lines] == [
        ("rank 0", 1, 2, 15),
        ("rank 0", 2, 2, 20),
        ("rank 1", 1, 1, 3),
    ]
    assert lines[1]["step"] == list(range(1, 21)) and lines[1]["time"][0] == 201.0
    # Steps repeated (two calls at one step) or absent are no restart.
    assert len(plot_data.attempts([sample(1, 1), sample(1, 2), sample(None, 3), sample(2, 4)])) == 1


def test_non_finite_values_are_null_with_their_kind() -> None:
    lines = plot_data.plot_series(
        [sample(0, 1, value=1.5), sample(1, 2, value=float("inf")), sample(2, 3, value=float("nan"))]
    )
    assert lines[0]["value"] == [1.5, None, None] and lines[0]["special"] == {"1": "inf", "2": "nan"}


RESTARTS = """
import os, sys
import kubetrain.metrics as m
marker = sys.argv[1]
first = not os.path.exists(marker)
open(marker, "a").close()
for step in range(1, 16 if first else 21):
    m.log(step=step, loss=1.0 / step)
sys.exit(3 if first else 0)
"""


def test_a_restarted_jobs_metric_comes_as_a_line_per_attempt(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "restarts.py").write_text(RESTARTS)
    run = {"exec": [sys.executable, str(tmp_path / "restarts.py"), str(tmp_path / "marker")]}
    job = local.run(make_job({"framework": "generic", "run": run, "runPolicy": {"backoffLimit": 1}}, "again")).job_id
    lines = request(f"{server.url}/jobs/local/{job}/metrics?name=loss").json()["lines"]
    assert [(ln["attempt"], ln["step"][0], ln["step"][-1]) for ln in lines] == [(1, 1, 15), (2, 1, 20)]
    assert lines[0]["time"][-1] <= lines[1]["time"][0]  # the second attempt after the first


def test_the_samples_a_tracker_keeps_cost_tens_of_bytes_each_and_read_back_whole() -> None:
    """1,000 metrics x 2,000 steps held 400+ MB as sample objects; as columns of numbers they are ~26 bytes
    a sample. Measured by tracemalloc (what Python allocated), over samples made one at a time."""
    import tracemalloc

    def logged() -> Iterator[MetricSample]:
        for step in range(2000):
            for m in range(20):
                yield MetricSample(f"m{m}", 1.0 / (step + 1), step, 1000.0 + step, "worker", 0, 0)

    tracemalloc.start()
    try:
        kept = Samples(logged())
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 40_000
    assert held / len(kept) < 40, held / len(kept)
    back = kept.of("m7")
    assert back == [MetricSample("m7", 1.0 / (s + 1), s, 1000.0 + s, "worker", 0, 0) for s in range(2000)]
    no_step = MetricSample("x", 1.0, None, 5.0)
    assert Samples([no_step]).of("x") == [no_step]  # a sample without a step reads back without one


def test_a_jobs_metrics_are_bounded_in_names_and_in_samples_and_the_rest_is_counted() -> None:
    """A job logging more names than the limit keeps the first ones and counts the others; more samples than
    the bound thins the longest series evenly (their first and latest samples stay), so the server's memory
    for one job is bounded whatever the job logs."""
    from kubetrain.ui.metrics_tracker import MetricLimits

    def logged() -> Iterator[MetricSample]:
        for step in range(3000):
            for m in range(5):
                yield MetricSample(f"m{m}", float(step), step, 1000.0 + step, "worker", 0, 0)

    kept = Samples(logged(), MetricLimits(names=3, samples=2000))
    assert kept.names() == ["m0", "m1", "m2"]
    assert kept.omitted == {"m3", "m4"} and kept.omitted_samples == 2 * 3000
    assert len(kept) <= 2000
    for name in kept.names():
        steps = [s.step for s in kept.of(name)]
        assert steps[0] == 0 and steps[-1] == 2999 and steps == sorted(steps), name
        assert len(steps) > 200, name  # thinned evenly across all three, not one series emptied


def test_metric_limits_below_one_are_usage_errors() -> None:
    for flag in ("--max-metric-names", "--max-metric-samples"):
        result = cli("ui", flag, "0")
        assert result.returncode == 2 and f"{flag} 0: give a number from 1" in result.stderr, result.stderr
