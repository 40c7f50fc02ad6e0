"""A terminal that stops reading (`kubetrain run job.yaml | sleep 400`) never holds up the log files or the
supervisor: every byte reaches the logs, `cancel` works at once, and no process of the job is left."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kubetrain.backends.local.live_output import LiveOutput
from kubetrain.status import JobPhase
from tests.support.helpers import (
    CLI,
    alive,
    cli,
    job_file,
    local_backend,
    log_lines,
    no_traceback,
    wait_for,
    wait_gone,
)

LINES = 20_000  # about 2 MB per replica
WRITER = """\
import os, sys, time
me = os.environ["KUBETRAIN_REPLICA_INDEX"]
for i in range(int(sys.argv[1])):
    print(f"replica {me} line {i:06d} " + "x" * 80)
print(f"replica {me} wrote everything", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("stop", ["cancel", "ctrl-c", "delete"])
def test_a_terminal_nobody_reads_holds_up_neither_the_logs_nor_cancel(tmp_path: Path, stop: str) -> None:
    """Stopped by `kubetrain cancel`, by Ctrl-C to the run itself, or by `kubetrain delete`, while its terminal
    reads nothing: the job stops at once, with its true outcome, and no process of it is left."""
    (tmp_path / "writer.py").write_text(WRITER)
    path = job_file(
        tmp_path, {"framework": "generic", "replicas": 2, "run": {"python": ["writer.py", str(LINES)]}}, name="blocked"
    )
    read_end, write_end = os.pipe()  # a pipe whose reader never reads: `| sleep 400`
    errors = (tmp_path / "stderr.txt").open("w")
    run = subprocess.Popen([*CLI, "run", str(path)], stdout=write_end, stderr=errors)
    os.close(write_end)
    try:
        job_id = wait_for("the job id", lambda: cli("list", "-o", "name").stdout.split()[:1])[0]
        # Every byte reaches the log files although the terminal took at most a pipe's worth.
        wait_for(
            "both replicas' output in their logs",
            lambda: all(lines and lines[-1].endswith("wrote everything") for lines in log_lines(job_id).values()),
        )
        with local_backend() as backend:
            records = backend.store.replica_records(job_id)
        pids = [r.pid for r in records if r.pid]
        assert len(pids) == 2
        written = {key: [line for line in lines if " line " in line] for key, lines in log_lines(job_id).items()}
        started = time.monotonic()
        if stop == "ctrl-c":
            run.send_signal(signal.SIGINT)
        else:
            done = cli(stop, job_id)
            no_traceback(done)
            assert done.returncode == 0, done.stderr
        # No process of the job is left (checked by the pids the store recorded), and `run` itself ends.
        wait_gone(pids)
        assert run.wait(timeout=60) == 130
        print(f"{stop} with a blocked stdout took {time.monotonic() - started:.2f}s")  # -s; no timing assertion
        assert not any(alive(p) for p in pids)
        with local_backend() as backend:
            if stop == "delete":
                assert job_id not in [s.job_id for s in backend.list()]
            else:
                assert backend.status(job_id).phase is JobPhase.CANCELLED
        # Every line each replica wrote is in its log file.
        for key, lines in written.items():
            assert len(lines) == LINES, key
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        os.close(read_end)
        errors.close()
    text = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in text and "Fatal Python error" not in text, text


class GatedSink:
    """A sink whose flush blocks until the gate opens, as a write to a terminal nobody reads does."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lines: list[tuple[str, str, str]] = []

    def add_keys(self, keys: object) -> None:
        pass

    def line(self, key: str, stream: str, text: str) -> None:
        self.lines.append((key, stream, text))

    def record(self, rec: object) -> None:
        raise AssertionError("not used")

    def flush(self) -> None:
        self.gate.wait()


def test_live_output_never_blocks_and_says_how_many_lines_the_terminal_missed() -> None:
    sink = GatedSink()
    live = LiveOutput(sink, job="job-x", limit=10_000)
    total = 5000
    for i in range(total):
        live.line("worker-0", "stdout", f"line {i:04d}")
        live.flush()  # returns although the sink is blocked
    sink.gate.set()
    assert live.close()
    shown = [int(text.split()[1]) for _, stream, text in sink.lines if stream == "stdout"]
    notes = [text for _, stream, text in sink.lines if stream == "stderr"]
    missed = sum(int(note.split("… ")[1].split()[0].replace(",", "")) for note in notes)
    assert notes and all(note.endswith("not shown here; `kubetrain logs job-x` has them") for note in notes)
    assert shown == sorted(shown)
    assert len(shown) + missed == total
    assert live.dropped_total == missed


def test_closing_gives_up_on_a_sink_that_takes_nothing() -> None:
    sink = GatedSink()
    live = LiveOutput(sink, job="job-x")
    live.line("worker-0", "stdout", "first")
    live.flush()
    live.line("worker-0", "stdout", "second")
    assert live.close(stall=0.2) is False  # returns: the lines are in the log files
    sink.gate.set()
