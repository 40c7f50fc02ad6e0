"""`kubetrain metrics ID`: the latest values and curves of what a real job logged, for people (a table, redrawn
with --watch on a terminal) and for scripts (csv, json, TensorBoard event files)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from kubetrain.metrics.sample import MetricSample
from kubetrain.metrics.summary import BARS, NAME_WIDTH
from kubetrain.metrics.tensorboard import export
from tests.metrics.terminal_session import TerminalSession
from tests.support.helpers import CLI, cli, make_job, open_gate, run_job, spawn_cli, start_gated_metrics, write

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
    assert len(data) == 40 and set(data[0]) == {"name", "value", "special", "step", "time", "role", "index", "rank"}
    assert [d["time"] for d in data] == sorted(d["time"] for d in data)


def test_a_job_without_metrics_says_how_to_log_them(tmp_path: Path) -> None:
    write(tmp_path / "quiet.py", "print('no metrics')\n")
    status = run_job(make_job({"framework": "generic", "replicas": 1, "run": {"python": ["quiet.py"]}}), tmp_path)
    done = cli("metrics", status.job_id)
    assert done.returncode == 0 and done.stdout == ""
    assert "kubetrain.metrics.log(" in done.stderr
    exported = cli("metrics", status.job_id, "--tensorboard", tmp_path / "tb")
    assert exported.returncode == 0 and "nothing to export" in exported.stderr, exported.stderr
    assert not (tmp_path / "tb").exists()  # no empty folder left behind as if something were written
    missing = cli("metrics", "no-such-job")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_tensorboard_reads_the_exported_event_files(finished_job: str, tmp_path: Path) -> None:
    out = tmp_path / "tb"
    for _ in range(2):  # exporting again replaces the runs' points, never adds a second copy of them
        done = cli("metrics", finished_job, "--tensorboard", out)
        assert done.returncode == 0, done.stderr
        assert "40 samples in 2 runs under" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["rank-0", "rank-1"]
    assert [len(list(run.iterdir())) for run in sorted(out.iterdir())] == [1, 1]  # one file per run, no temp
    # Values beyond float32, TensorBoard's scalar type, as TensorFlow itself stores them: ±inf.
    beyond = tmp_path / "beyond"
    export([MetricSample("huge", v, i, float(i), rank=0) for i, v in enumerate((1e300, -1e300, 2.0**127))], beyond)
    # Read back with TensorFlow's own reader (which checks every record's CRC), as TensorBoard reads them.
    reader = """\
import glob, json, sys, tensorflow as tf
got = {}
for folder in sys.argv[1:]:
    for path in glob.glob(folder + "/*/*tfevents*"):
        run = path.split("/")[-2]
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                got.setdefault(run, {}).setdefault(value.tag, []).append([event.step, round(value.simple_value, 4)])
print(json.dumps(got))
"""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    read = subprocess.run(
        [sys.executable, "-c", reader, str(out), str(beyond)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    got = json.loads(read.stdout.strip().splitlines()[-1])
    assert got["rank-1"]["loss"] == [[s, round(2.0 / (s + 1) + 1, 4)] for s in range(10)]
    assert got["rank-0"]["samples_per_s"] == [[s, 100.0 + 10 * s] for s in range(10)]
    assert got["rank-0"]["huge"] == [[0, math.inf], [1, -math.inf], [2, 2.0**127]]  # within float32: kept


def test_tensorboard_to_a_path_that_cannot_be_a_folder_is_a_one_line_error(finished_job: str, tmp_path: Path) -> None:
    a_file = write(tmp_path / "notes.txt", "mine\n")
    expected = {
        a_file: f"error: {a_file}: not a folder (--tensorboard names the folder to write the runs under)",
        a_file / "runs": f"error: {a_file / 'runs'}: Not a directory",
    }
    for target, message in expected.items():
        done = cli("metrics", finished_job, "--tensorboard", target)
        assert done.returncode == 1 and done.stderr.splitlines() == [message], done.stderr
    assert a_file.read_text() == "mine\n"
    # A run that cannot be written (its name taken by a file) fails alone: what was written is whole, no temp.
    out = tmp_path / "tb"
    write(out / "rank-1", "a file where a run folder goes\n")
    done = cli("metrics", finished_job, "--tensorboard", out)
    assert done.returncode == 1 and done.stderr.splitlines() == [f"error: {out / 'rank-1'}: File exists"]
    assert sorted(p.name for p in out.rglob("*")) == ["events.out.tfevents.kubetrain", "rank-0", "rank-1"]


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


ODD = """\
import kubetrain.metrics as m
for step in range(3):
    loss = float("nan") if step == 1 else 1.0 / (step + 1)
    m.log(step=step, loss=loss, **{"a b\\n<script>alert(9)</script>": 1.0, "x" * 200: 2.0})
m.log(step=3, grad_norm=float("inf"), drift=-float("inf"))
"""


def test_odd_names_keep_the_table_one_row_per_metric_and_json_stays_strict(tmp_path: Path) -> None:
    write(tmp_path / "odd.py", ODD)
    status = run_job(make_job({"framework": "generic", "replicas": 1, "run": {"python": ["odd.py"]}}), tmp_path)
    assert status.phase.value == "Succeeded"
    rows = cli("metrics", status.job_id).stdout.splitlines()
    assert len(rows) == 6, rows  # a header and five metrics: a newline in a name splits no row
    names = [row[:NAME_WIDTH] for row in rows[1:]]
    assert names[1].rstrip() == "a b\\x0a<script>alert(9)</script>"  # escaped, shown as text
    assert names[2] == "x" * (NAME_WIDTH - 1) + "…"  # cut: the other rows stay narrow
    assert max(len(row) for row in rows) < NAME_WIDTH + 70
    assert [row.split()[1] for row in rows[4:]] == ["inf", "-inf"]
    # csv and json give the names whole and the values as each format can hold them.
    by_name = {r["name"]: r for r in csv.DictReader(io.StringIO(cli("metrics", status.job_id, "-o", "csv").stdout))}
    assert {"a b\n<script>alert(9)</script>", "x" * 200} <= set(by_name)
    assert by_name["grad_norm"]["value"] == "inf"

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    data = json.loads(cli("metrics", status.job_id, "-o", "json").stdout, parse_constant=no_constants)
    loss = [(d["step"], d["value"], d["special"]) for d in data if d["name"] == "loss"]
    assert loss == [(0, 1.0, None), (1, None, "nan"), (2, 1.0 / 3, None)]
    assert [(d["value"], d["special"]) for d in data if d["step"] == 3] == [(None, "inf"), (None, "-inf")]
    assert "x" * 200 in {d["name"] for d in data}


def read_table(stream: IO[str]) -> list[str]:
    """One table `--watch` prints when not on a terminal: its lines up to the blank line that ends it."""
    lines = []
    while (line := stream.readline()) not in ("\n", ""):
        lines.append(line.rstrip("\n"))
    return lines


def test_watch_piped_prints_the_table_per_burst_and_on_ctrl_c_the_latest(tmp_path: Path) -> None:
    job_id, gate = start_gated_metrics(tmp_path, 0.25)
    to_the_end = spawn_cli("metrics", job_id, "--watch")
    interrupted = spawn_cli("metrics", job_id, "--watch")
    try:
        for watcher in (to_the_end, interrupted):
            assert watcher.stdout is not None
            table = read_table(watcher.stdout)  # while the job runs, not only when it ends
            assert re.match(r"loss +1 +0 +worker-0 +1 ", table[1]), table
        interrupted.send_signal(signal.SIGINT)
        out, _ = interrupted.communicate(timeout=60)
        assert interrupted.returncode == 130
        assert re.match(r"loss +1 +0 +worker-0 +1 ", out.splitlines()[1]), out  # the latest table, again
        open_gate(gate)
        assert to_the_end.stdout is not None
        table = read_table(to_the_end.stdout)
        assert re.match(r"loss +0\.25 +1 +worker-0 +2 ", table[1]), table
        rest, _ = to_the_end.communicate(timeout=60)
        assert to_the_end.returncode == 0 and rest == ""  # ends with the job, the last table already printed
    finally:
        for watcher in (to_the_end, interrupted):
            if watcher.poll() is None:
                watcher.kill()
                watcher.communicate()
