"""What the web view answers for what is not there, and how it shows what a replica printed: an address
naming no backend or no job is a 404 (page, stream, data, action), an action a job cannot take is a 409,
and control characters, escape sequences and text-reordering marks never reach the page as they are."""

from __future__ import annotations

import html
import sys
import threading
import time
from pathlib import Path

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import Events, gated_job, release, request

# A bell, colours, a window title and the "Trojan Source" override (U+202E) and isolate (U+2066).
NASTY = "print('bell\\x07 \\x1b[31mred\\x1b[0m \\x1b]0;title\\x07\\u202eevil\\u2066x', flush=True)"
SHOWN = "bell\\x07 red \\u202eevil\\u2066x"


def one_replica(local: LocalBackend, tmp_path: Path, code: str, name: str, exit_code: int = 0) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(f"import sys\n{code}\nsys.exit({exit_code})\n")
    job = exec_job([sys.executable, str(script)], name)
    return local.run(job).job_id


def test_an_address_naming_no_backend_or_no_job_is_a_404(server: Background, local: LocalBackend) -> None:
    for path in ("/content", "/detail.json", "/events", "/plot.svg?name=loss"):
        reply = request(f"{server.url}/jobs/nope/some-job{path}")
        assert reply.status == 404, path
        assert "no backend 'nope' in this view (it shows: local)" in html.unescape(reply.body), path
    assert request(f"{server.url}/jobs/nope/some-job/cancel", "POST").status == 404
    assert request(f"{server.url}/jobs/local/no-such-job/content").status == 404
    assert request(f"{server.url}/jobs/local/no-such-job/detail.json").status == 404
    for action in ("cancel", "suspend", "resume", "delete"):
        reply = request(f"{server.url}/jobs/local/no-such-job/{action}", "POST")
        assert reply.status == 404 and "no job matches 'no-such-job'" in reply.json()["error"], action


def test_an_action_the_job_cannot_take_is_a_409(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    job_id = one_replica(local, tmp_path, "print('done')", "done")
    assert local.status(job_id).phase is JobPhase.SUCCEEDED
    reply = request(f"{server.url}/jobs/local/{job_id}/suspend", "POST")
    assert reply.status == 409 and "Succeeded" in reply.json()["error"]


def test_a_replicas_control_characters_reach_the_page_escaped(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    """In the log view and in the failure summary's last lines, as `kubetrain logs` shows them."""
    job_id = one_replica(local, tmp_path, NASTY, "nasty", exit_code=3)
    with Events(f"{server.url}/jobs/local/{job_id}/events") as events:
        texts = [text for _key, _stream, text, _t in events.until("lines")]
    assert texts == [SHOWN]
    detail = request(f"{server.url}/jobs/local/{job_id}/detail.json").json()
    assert detail["failure"]["lastLines"] == [SHOWN]
    raw = request(f"{server.url}/jobs/local/{job_id}/content").body
    for char in ("\x07", "\x1b", "\u202e", "\u2066"):
        assert char not in raw


def _followers(job_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"ui-logs-{job_id}"]


def test_a_closed_page_leaves_no_log_follower_behind(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    """A page closed while its job runs quietly: the thread following the job's log for it ends, instead of
    waiting for the job's next line (which may be hours away, or never while it is suspended)."""
    job = gated_job(local, tmp_path, gates=1)
    try:
        local.resume(job.job_id)
        with Events(f"{server.url}/jobs/local/{job.job_id}/events") as events:
            got: list[str] = []
            for event, data in events:
                if event == "lines":
                    got += [text for _key, _stream, text, *_ in data]
                if "replica 0 step 4" in got and "replica 1 step 4" in got:
                    break  # both replicas now wait at their gate: the log is quiet
            assert len(_followers(job.job_id)) == 1
        deadline = time.monotonic() + 20  # a bound for a hung test, not a measured time
        while _followers(job.job_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _followers(job.job_id) == []
        assert local.status(job.job_id).phase is JobPhase.RUNNING  # the job itself goes on
    finally:
        release(job)
