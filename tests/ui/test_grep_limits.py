"""A grep typed in a job page that would search forever (an expression that backtracks, on a long line) is
stopped and said to the viewer, while the web view goes on answering everyone else and Ctrl-C still stops
it: Python's `re` would hold the interpreter for as long as it backtracks, which can be years."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import Events, request, ui_process

# On a line of X's, `(X+)+Y` tries every way to split the X's before it gives up: 2**n ways for n X's.
BACKTRACKS = urlencode({"grep": "(X+)+Y"})
# The local backend keeps a line in pieces of 1 MiB (`logfiles.MAX_LINE`): the first piece is searched first.
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
    assert [text for _key, _stream, text, _time in found] == ["XY"]  # what it found before, it shows
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
