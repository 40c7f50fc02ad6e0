"""`kubetrain logs --until` and `--stream` on the local backend, as a user runs them: the log files keep each
line's stream and time, so both filters are exact here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import TICK, cli, generic, job_file, no_traceback, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ticked(tmp_path: Path) -> str:
    """A finished job: worker-0 and worker-1 each printed `tick 0..4 <key>` on stdout, then one stderr line."""
    write(tmp_path / "tick.py", TICK)
    assert cli("run", job_file(tmp_path, generic(["tick.py", "5", "0.05"]), "window"), "-q").returncode == 0
    return cli("list", "-o", "name").stdout.split()[0]


def lines_of(result: Any) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_stream_keeps_stdout_or_stderr(ticked: str) -> None:
    out = cli("logs", ticked, "--stream", "stdout")
    assert sorted(lines_of(out)) == sorted(f"[worker-{r}] tick {i} worker-{r}" for r in range(2) for i in range(5))
    assert out.stderr == ""
    err = cli("logs", ticked, "--stream", "stderr")
    assert lines_of(err) == []  # stderr lines are printed on stderr, as by `logs` without --stream
    assert sorted(err.stderr.splitlines()) == [f"[worker-{r}] error-line from worker-{r}" for r in range(2)]
    one = cli("logs", ticked, "--stream", "stderr", "--role", "worker", "--index", "1", "--tail", "1")
    assert one.stderr == "[worker-1] error-line from worker-1\n"
    bad = cli("logs", ticked, "--stream", "both")
    assert bad.returncode == 2 and "invalid choice: 'both'" in bad.stderr


def test_until_ends_the_output_at_a_time(ticked: str) -> None:
    stamped = lines_of(cli("logs", ticked, "--timestamps", "--role", "worker", "--index", "0", "--stream", "stdout"))
    times = [line.split()[1] for line in stamped]
    assert len(times) == 5 and times == sorted(times) and all(len(t) == len("2026-11-27T16:20:00.123456789Z")
                                                              for t in times)  # as kubectl's, to the nanosecond
    # Until the time of `tick 3`: the lines before it, not it (exclusive, as TorchX's log_iter).
    cut = times[3]
    before = lines_of(cli("logs", ticked, "--until", cut, "--role", "worker", "--index", "0", "--stream", "stdout"))
    assert before == [f"[worker-0] tick {i} worker-0" for i in range(3)]
    # The same time with an offset instead of Z.
    as_offset = cut.replace("Z", "+00:00")
    assert lines_of(cli("logs", ticked, "--until", as_offset, "--role", "worker", "--index", "0", "--stream",
                        "stdout")) == before
    # With --tail: the last lines before that time.
    tail = cli("logs", ticked, "--until", cut, "--tail", "2", "--role", "worker", "--index", "0")
    assert lines_of(tail) == ["[worker-0] tick 1 worker-0", "[worker-0] tick 2 worker-0"]
    # A duration back from now: every line is newer than an hour ago, and older than the next second.
    assert lines_of(cli("logs", ticked, "--until", "1h")) == []
    assert len(lines_of(cli("logs", ticked, "--until", "2099-01-01T00:00:00Z", "--stream", "stdout"))) == 10


def test_until_refuses_what_it_cannot_mean(ticked: str) -> None:
    for args in (["--until", "yesterday"], ["--until", "2026-13-01T00:00:00Z"], ["-f", "--until", "5m"]):
        result = cli("logs", ticked, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "--until" in result.stderr
        no_traceback(result)
