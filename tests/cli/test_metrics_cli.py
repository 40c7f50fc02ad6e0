"""`kubetrain metrics ID`: the latest values and curves of what a real job logged, for people (a table, redrawn
with --watch on a terminal) and for scripts (csv, json, TensorBoard event files)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.metrics.summary import BARS
from tests.metrics.terminal_session import TerminalSession
from tests.support.helpers import CLI, cli, make_job, open_gate, run_job, start_gated_metrics, write

TRAIN = """\
import os, kubetrain.metrics as m
rank = int(os.environ["RANK"])
for step in range(10):
    m.log(step=step, loss=2.0 / (step + 1) + rank, samples_per_s=100.0 + 10 * step)
"""


@pytest.fixture
def finished_job(tmp_path: Path) -> str:
    write(tmp_path / "train.py", TRAIN)
    status = run_job(make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["train.py"]}}), tmp_path)
    assert status.phase.value == "Succeeded"
    return status.job_id


def test_the_table_has_each_metrics_latest_value_and_its_curve(finished_job: str) -> None:
    done = cli("metrics", finished_job[:8])
    assert done.returncode == 0, done.stderr
    header, loss, rate = done.stdout.splitlines()
    assert header.split() == ["METRIC", "LATEST", "STEP", "SOURCE", "SAMPLES", "CURVE"]
    assert loss.split() == ["loss", "0.2", "9", "rank", "0", "10", BARS[-1] + loss.split()[-1][1:]]
    assert loss.split()[-1][-1] == BARS[0]  # falling loss: high bar first, low bar last
    assert rate.split()[:6] == ["samples_per_s", "190", "9", "rank", "0", "10"]
    assert list(rate.split()[-1]) == sorted(rate.split()[-1])  # rising throughput
    per_rank = cli("metrics", finished_job, "--per-rank").stdout.splitlines()
    assert [line.split()[:5] for line in per_rank[1:]] == [
        ["loss", "0.2", "9", "rank", "0"],
        ["loss", "1.2", "9", "rank", "1"],
        ["samples_per_s", "190", "9", "rank", "0"],
        ["samples_per_s", "190", "9", "rank", "1"],
    ]


def test_csv_and_json_give_every_sample(finished_job: str) -> None:
    rows = list(csv.DictReader(io.StringIO(cli("metrics", finished_job, "-o", "csv").stdout)))
    assert len(rows) == 40
    assert {(r["rank"], r["role"], r["index"]) for r in rows} == {("0", "worker", "0"), ("1", "worker", "1")}
    assert float(next(r["value"] for r in rows if r["name"] == "loss" and r["rank"] == "1" and r["step"] == "0")) == 3.0
    data = json.loads(cli("metrics", finished_job, "-o", "json").stdout)
    assert len(data) == 40 and set(data[0]) == {"name", "value", "step", "time", "role", "index", "rank"}
    assert [d["time"] for d in data] == sorted(d["time"] for d in data)


def test_a_job_without_metrics_says_how_to_log_them(tmp_path: Path) -> None:
    write(tmp_path / "quiet.py", "print('no metrics')\n")
    status = run_job(make_job({"framework": "generic", "replicas": 1, "run": {"python": ["quiet.py"]}}), tmp_path)
    done = cli("metrics", status.job_id)
    assert done.returncode == 0 and done.stdout == ""
    assert "kubetrain.metrics.log(" in done.stderr
    missing = cli("metrics", "no-such-job")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_tensorboard_reads_the_exported_event_files(finished_job: str, tmp_path: Path) -> None:
    out = tmp_path / "tb"
    done = cli("metrics", finished_job, "--tensorboard", out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["rank-0", "rank-1"]
    # Read back with TensorFlow's own reader (which checks every record's CRC), as TensorBoard reads them.
    reader = """\
import glob, json, sys, tensorflow as tf
got = {}
for path in glob.glob(sys.argv[1] + "/*/events.out.tfevents.*"):
    run = path.split("/")[-2]
    for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
            got.setdefault(run, {}).setdefault(value.tag, []).append([event.step, round(value.simple_value, 4)])
print(json.dumps(got))
"""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    read = subprocess.run(
        [sys.executable, "-c", reader, str(out)], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    got = json.loads(read.stdout.strip().splitlines()[-1])
    assert got["rank-1"]["loss"] == [[s, round(2.0 / (s + 1) + 1, 4)] for s in range(10)]
    assert got["rank-0"]["samples_per_s"] == [[s, 100.0 + 10 * s] for s in range(10)]


def test_watch_redraws_the_table_as_a_running_job_logs(tmp_path: Path) -> None:
    job_id, gate = start_gated_metrics(tmp_path, 0.25)
    session = TerminalSession([*CLI, "metrics", job_id, "--watch"])
    session.expect(r"loss +1 +0 ")
    open_gate(gate)
    session.expect(r"loss +0\.25 +1 ")
    assert session.finish() == 0  # ends with the job
    screen = [line for line in session.screen.text() if line]
    assert len(screen) == 2, screen  # redrawn in place: one table on the screen, the latest
    assert re.match(r"loss +0\.25 +1 +worker-0 +2 +" + BARS[-1] + BARS[0], screen[1])  # generic: no rank
