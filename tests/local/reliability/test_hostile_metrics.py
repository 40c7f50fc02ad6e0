"""What a replica writes as metrics is read as hostile: numbers beyond a float, times beyond any clock, names
that would blind a table, a line claiming another replica, a metrics file swapped for a symlink to a device,
a FIFO or a path outside the job. Every reader (the live line of an attached run, `kubetrain metrics`, the
backends' `metrics`) reads on past them; nothing hangs, crashes or is mislabelled. And a writer on a full disk
loses no record after the one the disk cut short, and marks the gap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.metrics.reader import MetricFile, read_files
from kubetrain.metrics.sample import MARKER, parse_file_line, parse_log_line
from kubetrain.status import JobPhase
from tests.metrics.terminal_session import TerminalSession
from tests.support.helpers import CLI, cli, exec_job, make_job, write

HUGE = "1" + "0" * 400
"""An integer JSON reads as Python's unbounded int: `float()` of it raises OverflowError."""


def record(values: str, time: str = "1767225600.5", **extra: str) -> str:
    fields = "".join(f', "{k}": {v}' for k, v in extra.items())
    return f'{{"time": {time}, "step": 1{fields}, "values": {values}}}'


def test_values_and_times_out_of_range_are_skipped_and_the_rest_is_read() -> None:
    assert parse_file_line(record(f'{{"loss": {HUGE}, "acc": 0.5}}')) == [
        s for s in parse_file_line(record('{"acc": 0.5}'))
    ]
    assert parse_file_line(record('{"loss": 1.0}', time="1e308")) == []  # no axis or clock places it
    assert parse_file_line(record('{"loss": 1.0}', time="-5")) == []
    assert parse_file_line(record('{"loss": 1.0}', time="NaN")) == []
    [kept] = parse_file_line(record('{"loss": 1.0}', rank=HUGE, index="-1"))
    assert kept.rank is None and kept.index is None  # out of range: not known
    [inf] = parse_file_line(record('{"loss": 1e999}'))  # beyond a float in the text: infinite, and shown so
    assert inf.value == float("inf")
    too_long = "x" * 10_000
    assert [s.name for s in parse_file_line(record(f'{{"{too_long}": 1, "ok": 2}}'))] == ["ok"]


def test_a_line_takes_the_replica_it_came_from_not_the_one_it_names() -> None:
    line = MARKER + record('{"loss": 0.5}', role='"chief"', index="7", rank="3")
    [sample] = parse_log_line(line, "worker-1") or []
    assert (sample.role, sample.index, sample.rank) == ("worker", 1, 3)
    [sample] = parse_log_line(line, "worker-1.0") or []  # a process's key names its replica too
    assert (sample.role, sample.index) == ("worker", 1)


PRINTS_HUGE = f"""\
import sys
print("before", flush=True)
print('{MARKER}' + '{record(f'{{"loss": {HUGE}}}')}', flush=True)
print('{MARKER}' + '{record('{"loss": 0.25}', time="1e308")}', flush=True)
for i in range(3):
    print(f"after {{i}}", flush=True)
"""


def test_an_attached_run_on_a_terminal_shows_every_line_after_a_hostile_metric_line(tmp_path: Path) -> None:
    """The live line parses metric lines of the replicas' output: one it cannot read must not end the thread
    that shows the output (every later line would be missing from the terminal)."""
    write(tmp_path / "train.py", PRINTS_HUGE)
    session = TerminalSession([*CLI, "run", "--", "python", "train.py"], cwd=str(tmp_path))
    assert session.finish() == 0, session.raw[-2000:]
    screen = [line for line in session.screen.text() if line]
    for i in range(3):
        assert f"[worker-0] after {i}" in screen, screen
    assert "Traceback" not in session.raw


LOGS_THEN_HUGE = f"""\
import kubetrain.metrics as m, os
m.log(step=1, loss=0.5)
with open(os.environ["KUBETRAIN_METRICS_FILE"], "a") as f:  # what a careless (or hostile) writer leaves
    f.write('{record(f'{{"loss": {HUGE}}}')}' + "\\n")
    f.write('{record('{"loss": 0.1}', time="1e308")}' + "\\n")
m.log(step=2, loss=0.25)
"""


def test_kubetrain_metrics_reads_past_numbers_no_float_holds(tmp_path: Path) -> None:
    write(tmp_path / "train.py", LOGS_THEN_HUGE)
    ran = cli("run", "--", "python", "train.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    listed = cli("list", "-o", "name", cwd=tmp_path)
    job = listed.stdout.split()[0].split("/")[-1]
    done = cli("metrics", job, "-o", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [(s["step"], s["value"]) for s in json.loads(done.stdout)] == [(1, 0.5), (2, 0.25)]


SWAPS_ITS_FILE = """\
import kubetrain.metrics as m, os, sys
m.log(step=1, loss=0.5)
path = os.environ["KUBETRAIN_METRICS_FILE"]
os.unlink(path)
if sys.argv[1] == "symlink":
    os.symlink("/dev/zero", path)
elif sys.argv[1] == "fifo":
    os.mkfifo(path)
"""


@pytest.mark.parametrize("swap", ["symlink", "fifo"])
def test_a_metrics_file_swapped_for_a_device_or_a_fifo_is_refused_not_read(tmp_path: Path, swap: str,
                                                                          capfd: pytest.CaptureFixture[str]) -> None:
    """`/dev/zero` would be read without end (memory without bound), a FIFO with no writer would block the
    reader for ever: both are refused, said once, and the job's other files are read."""
    write(tmp_path / "swap.py", SWAPS_ITS_FILE)
    with LocalBackend() as local:
        job = exec_job([sys.executable, str(tmp_path / "swap.py"), swap]).with_base_dir(tmp_path)
        result = local.run(job)
        assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
        assert list(local.metrics(result.job_id)) == []
        assert list(local.metrics(result.job_id, follow=True)) == []  # ended job: returns, never blocks
    said = capfd.readouterr().err
    assert "not read" in said and ("symbolic link" in said or "not a regular file" in said)


def test_a_metrics_path_outside_the_jobs_folder_is_refused(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    write(tmp_path / "log.py", "import kubetrain.metrics as m\nm.log(step=1, loss=0.5)\n")
    with LocalBackend() as local:
        job = make_job({"framework": "generic", "run": {"exec": [sys.executable, str(tmp_path / "log.py")]},
                        "env": {"KUBETRAIN_METRICS_FILE": str(outside)}}).with_base_dir(tmp_path)
        result = local.run(job)
        assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
        assert outside.exists()  # the program wrote where its env said
        assert list(local.metrics(result.job_id)) == []
    assert "outside the job's folder" in capfd.readouterr().err


def test_a_reader_that_fell_behind_reads_a_big_file_in_bounded_steps(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import kubetrain.metrics.reader as reader

    monkeypatch.setattr(reader, "READ_CHUNK", 4096)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(record(f'{{"loss": {i}}}') + "\n" for i in range(2000)))
    assert [s.value for s in read_files([path])] == [float(i) for i in range(2000)]
    one = MetricFile(path)
    assert 0 < len(one.read_new()) < 2000 and one.behind  # one chunk at a time


WRITES_ON_A_FULL_DISK = """\
import os, sys, kubetrain.metrics as m
path = os.environ["KUBETRAIN_METRICS_FILE"]
m.log(step=1, loss=1.0)
# Pad the file to 30 bytes short of a page: the next record then fits only in part in the space left to it.
size = os.path.getsize(path)
pad = -(size + 1 + 30) % 4096 + 1
with open(path, "a") as f:
    f.write("#" * (pad - 1) + "\\n")
fd = os.open(os.path.join(os.path.dirname(path), "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
chunk = 4096
while chunk:  # fill to the last byte: the next record can be written only in part, or not at all
    try:
        os.write(fd, b"x" * chunk)
    except OSError:
        chunk //= 2
for step in range(2, 6):
    m.log(step=step, loss=float(step))  # these fail (never raising into the loop)
os.close(fd)
os.unlink(os.path.join(os.path.dirname(path), "filler"))  # the disk has room again
for step in range(6, 9):
    m.log(step=step, loss=float(step))
with open(path) as f:
    sys.stdout.write(f.read())
"""


def test_a_full_disk_cuts_one_record_short_and_the_next_ones_are_whole_and_the_gap_marked(tmp_path: Path) -> None:
    assert shutil.which("unshare") is not None, "unshare (util-linux) mounts the small filesystem"
    small = tmp_path / "small"
    small.mkdir()
    write(tmp_path / "w.py", WRITES_ON_A_FULL_DISK)
    script = (
        f'mount -t tmpfs -o size=64k tmpfs "{small}" && '
        f'KUBETRAIN_METRICS_FILE="{small}/m.jsonl" "{sys.executable}" "{tmp_path / "w.py"}"'
    )
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    samples = [s for line in lines for s in parse_file_line(line)]
    assert [(s.step, s.value) for s in samples] == [(1, 1.0), (6, 6.0), (7, 7.0), (8, 8.0)]
    [lost] = [json.loads(line) for line in lines if '"lost"' in line]
    assert lost["lost"] == 4 and lost["why"]
    assert "metrics not written" in done.stderr  # said once to the script, never raised into it


NAMES_WITH_COMMANDS = """\
import kubetrain.metrics as m
m.log(step=1, **{"\\x1b]52;c;cm0gLXJmIH4=\\x07loss\\u202e": 0.5})
"""


def test_metric_names_reach_a_terminal_escaped_and_a_pipe_whole(tmp_path: Path) -> None:
    """A name is the replica's text: on a terminal its OSC 52 (write the clipboard) or its right-to-left mark
    must not act; in a file the name is kept exactly as logged."""
    write(tmp_path / "train.py", NAMES_WITH_COMMANDS)
    assert cli("run", "--", "python", "train.py", cwd=tmp_path).returncode == 0
    job = cli("list", "-o", "name", cwd=tmp_path).stdout.split()[0].split("/")[-1]
    for output in ("csv", "table"):
        session = TerminalSession([*CLI, "metrics", job, "-o", output], cwd=str(tmp_path))
        assert session.finish() == 0
        assert "\x1b]52" not in session.raw and "\u202e" not in session.raw, repr(session.raw)
        assert "\\x1b]52" in session.raw and "\\u202e" in session.raw
    piped = cli("metrics", job, "-o", "csv", cwd=tmp_path)
    assert "\x1b]52;c;cm0gLXJmIH4=\x07loss\u202e" in piped.stdout
