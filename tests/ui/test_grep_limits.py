"""A grep typed in a job page that would search forever (an expression that backtracks, on a long line) is
stopped and said to the viewer, while the web view goes on answering everyone else and Ctrl-C still stops
it: Python's `re` would hold the interpreter for as long as it backtracks, which can be years. One that
would take gigabytes to compile (`regex` copies a repeat's minimum count) is refused before it is compiled,
saying what to change; so is one nested too deep, in the page and in `kubetrain logs --grep`."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.server import Background
from tests.support.helpers import cli, exec_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import Events, request, ui_process

# On a line of X's, `(X+)+Y` tries every way to split the X's before it gives up: 2**n ways for n X's.
BACKTRACKS = urlencode({"grep": "(X+)+Y"})
# The local backend keeps a line in pieces of 1 MiB (`log_format.MAX_LINE`): the first piece is searched first.
SAID = re.compile(
    r"grep: this expression takes too long on the job's output \(the line worker-0 wrote at "
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, 1,048,576 characters long\): make it simpler"
)


def long_line_job(backend: LocalBackend) -> str:
    """A one-replica job that prints a line the grep finds at once, then one of 3 MiB of X's; returned once it
    has ended. A page's stream then reads its log from the file, line by line: the first line reaches the
    viewer as the grep moves on to the long one, so it is the sign that the grep is searching."""
    job = exec_job([sys.executable, "-c", "print('XY'); print('X' * (3 << 20))"], "long-line")
    job_id = backend.run(job, detach=True).job_id
    for _record in backend.logs(job_id, follow=True):  # until the job has ended
        pass
    return job_id


def test_a_grep_that_takes_too_long_is_stopped_and_said(server: Background, local: LocalBackend) -> None:
    job_id = long_line_job(local)
    with Events(f"{server.url}/jobs/local/{job_id}/events?{BACKTRACKS}") as events:
        status = events.until("status")
        found = events.until("lines")
        failed = events.until("failed")
    assert status["row"]["id"] == job_id  # the page's status is not held up by its log
    assert [text for _key, _stream, text, *_ in found] == ["XY"]  # what it found before, it shows
    assert SAID.fullmatch(failed["message"]), failed["message"]


def test_other_requests_are_answered_while_a_grep_searches(server: Background, local: LocalBackend) -> None:
    job_id = long_line_job(local)
    with Events(f"{server.url}/jobs/local/{job_id}/events?{BACKTRACKS}") as events:
        events.until("lines")  # the grep has found the first line and searches the long one
        # Another viewer's table (a socket timeout of 60 s guards the test; under `re` it would never come).
        reply = request(f"{server.url}/api/jobs")
        assert reply.status == 200
        assert [job["id"] for job in reply.json()["jobs"]] == [job_id]
        assert SAID.fullmatch(events.until("failed")["message"])


@pytest.fixture
def ui_server(kubetrain_home: Path) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """`kubetrain ui` over this test's jobs: the process, its port, and its token."""
    with ui_process(kubetrain_home) as started:
        yield started


def test_ctrl_c_stops_the_server_while_a_grep_searches(
    local: LocalBackend, ui_server: tuple[subprocess.Popen[str], int, str]
) -> None:
    job_id = long_line_job(local)
    proc, port, token = ui_server
    headers = {"Authorization": f"Bearer {token}"}
    with Events(f"http://127.0.0.1:{port}/jobs/local/{job_id}/events?{BACKTRACKS}", headers=headers) as events:
        events.until("lines")  # the grep has found the first line and searches the long one
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err


# -- what an expression costs to prepare -------------------------------------------------------------------

GB = 1 << 30
HUGE = "a{4294967294}"
NESTED = "(?:(?:a{1000}){1000}){1000}"
DEEP = "(" * 200 + "a" + ")" * 200
TOO_BIG = (
    "grep: this expression would take too much memory to prepare: its repeats expand to {pieces} pieces "
    "(at most 100,000): use smaller counts in {{m}} and {{m,n}} (a repeat's minimum is copied that many "
    "times, and nested repeats multiply), or + and *"
)


def peak_rss_mb(pid: int) -> float:
    """The most memory the process has held (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def bounded_ui(kubetrain_home: Path) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """`kubetrain ui` with an address space of 4 GB: a compile that would take gigabytes fails there
    instead of taking them from the machine."""
    with ui_process(kubetrain_home, memory=4 * GB) as started:
        yield started


def test_an_expression_that_would_take_gigabytes_is_refused_before_it_is_compiled(
    local: LocalBackend, bounded_ui: tuple[subprocess.Popen[str], int, str]
) -> None:
    job_id = local.run(exec_job([sys.executable, "-c", "print('a' * 10)"], "short"), detach=True).job_id
    proc, port, token = bounded_ui
    headers = {"Authorization": f"Bearer {token}"}
    said = {
        HUGE: TOO_BIG.format(pieces="4,294,967,295"),
        NESTED: TOO_BIG.format(pieces="1,001,001,001"),
        DEEP: "grep: groups nested 200 deep (at most 50): nest fewer parentheses",
        "()" * 2000: TOO_BIG.format(pieces="200,000"),  # empty groups: cubic compile time in `regex`
    }
    for grep, message in said.items():
        url = f"http://127.0.0.1:{port}/jobs/local/{job_id}/events?{urlencode({'grep': grep})}"
        with Events(url, headers=headers) as events:
            event, data = next(iter(events))
            assert (event, data["message"]) == ("failed", message), grep[:40]
            assert events.until("status")["row"]["id"] == job_id  # the page's status goes on
    reply = request(f"http://127.0.0.1:{port}/api/jobs", headers=headers)
    assert reply.status == 200 and proc.poll() is None
    # A generous bound: the refused compiles would have asked for gigabytes.
    assert peak_rss_mb(proc.pid) < 400, peak_rss_mb(proc.pid)


LONG_BUT_FINE = "|".join(f"never-printed-{n}" for n in range(300)) + r"|^line \d{3} x{1000}$"


def test_a_long_expression_within_the_bounds_still_works(server: Background, local: LocalBackend) -> None:
    assert len(LONG_BUT_FINE) > 5000
    script = "for i in range(100, 105): print(f'line {i} ' + 'x' * (1000 if i == 103 else 999))"
    job_id = local.run(exec_job([sys.executable, "-c", script], "lines")).job_id
    url = f"{server.url}/jobs/local/{job_id}/events?{urlencode({'grep': LONG_BUT_FINE})}"
    with Events(url) as events:
        found = events.until("lines")
        events.until("end")
    assert [text for _key, _stream, text, *_ in found] == ["line 103 " + "x" * 1000]


BOUND_SHAPES = ["a{N}", "(?:ab|cd){N}", "(a+b){N}", "(?:(a)|b){N}", "(?:a{2}){N}", "(a|){N}", "(){N}", "[a-z]{N}"]

COMPILE = """
import resource, sys
import regex
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
regex.compile(sys.argv[1])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.parametrize("shape", BOUND_SHAPES)
def test_the_budget_bounds_what_regex_takes_to_compile(shape: str) -> None:
    """The largest expression of each shape that the budget lets through compiles in `regex` within a
    generous bound of memory (and of CPU time, enforced on the process: no clock is read here)."""
    from kubetrain.contract.grep_bounds import MAX_PIECES, expanded_size

    unit = expanded_size(shape.replace("N", "2")) - expanded_size(shape.replace("N", "1"))
    count = (MAX_PIECES - expanded_size(shape.replace("N", "1")) + unit) // unit
    pattern = shape.replace("N", str(count))
    assert MAX_PIECES - unit < expanded_size(pattern) <= MAX_PIECES

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * GB, 2 * GB))
        resource.setrlimit(resource.RLIMIT_CPU, (30, 30))

    done = subprocess.run(
        [sys.executable, "-c", COMPILE, pattern], capture_output=True, text=True, timeout=120, preexec_fn=bounded
    )
    assert done.returncode == 0, (pattern[:40], done.returncode, done.stderr[-500:])
    assert int(done.stdout) < 64, (pattern[:40], f"{done.stdout.strip()} MB")


def test_the_cli_refuses_groups_nested_too_deep_and_keeps_huge_counts(local: LocalBackend) -> None:
    """`kubetrain logs --grep` compiles with `re`, which keeps a count as a count (`a{4294967294}` is cheap
    there) but recurses per group: a deep nest is refused with the page's words, not a RecursionError."""
    job_id = local.run(exec_job([sys.executable, "-c", "print('a' * 10)"], "short")).job_id
    deep = cli("logs", job_id, "--grep", DEEP)
    assert deep.returncode == 2 and "Traceback" not in deep.stderr, deep.stderr
    assert deep.stderr.strip() == (
        f"error: --grep {DEEP[:57] + '...'!r}: groups nested 200 deep (at most 50): nest fewer parentheses"
    )
    huge = cli("logs", job_id, "--grep", HUGE)
    assert (huge.returncode, huge.stdout, huge.stderr) == (0, "", "")
