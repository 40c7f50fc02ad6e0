"""The web view over HTTP, as a browser or a script meets it: pages, live events, logs, plots, actions,
and the guards (Host check, token, same origin, escaping). A real server on a thread, real local jobs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest.mock import ANY
from urllib.parse import urlencode

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.security import Guard
from kubetrain.ui.server import Background
from tests.support.helpers import no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import TOKEN, XSS, Events, gated_job, lines_of, release, request


def gather(events: Events, *, lines: int, samples: int) -> dict[str, Any]:
    """From a job page's stream: its next `lines` log lines, the latest status, and the metrics event that
    counts `samples` samples (whichever comes first: they share the stream)."""
    got: dict[str, Any] = {"lines": []}
    for event, data in events:
        if event == "lines":
            got["lines"] += [(key, text) for key, _s, text, *_ in data]
        elif event in ("status", "metrics"):
            got[event] = data
        if len(got["lines"]) >= lines and got.get("metrics", {}).get("samples") == samples:
            return got
    raise AssertionError(f"the stream ended early: {got}")


def log_events(url: str) -> list[tuple[str, Any]]:
    """The events of a job page's stream up to the end of its log (the stream itself goes on)."""
    seen = []
    with Events(url) as events:
        for event, data in events:
            seen.append((event, data))
            if event in ("end", "failed"):
                return seen
    raise AssertionError("the stream ended before its log did")


EVENTS = re.compile(r'data-events="([^"]+)"')


def test_jobs_table_updates_live_when_the_store_changes(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    with Events(server.url + "/events") as events:
        first = events.until("jobs")
        assert first == {"upsert": [], "order": None, "errors": [], "html": {}, "count": 0, "fragments": ANY}
        job = gated_job(local, tmp_path, gates=1)
        key = f"local/{job.job_id}"
        added = events.until("jobs", lambda d: d["order"] is not None)
        assert added["order"] == [key]
        [row] = added["upsert"]
        assert f'href="/jobs/local/{job.job_id}"' in added["html"][key]  # the row, rendered
        assert (row["id"], row["backend"], row["framework"], row["phase"]) == (
            job.job_id,
            "local",
            "generic",
            "Suspended",
        )
        assert (row["ready"], row["total"], row["restarts"]) == (0, 2, 0)
        local.resume(job.job_id)
        running = events.until("jobs", lambda d: d["upsert"] and d["upsert"][0]["ready"] == 2)
        assert running["order"] is None and running["upsert"][0]["phase"] == "Running"
        job.open_gate(0)
        done = events.until("jobs", lambda d: d["upsert"] and d["upsert"][0]["phase"] == "Succeeded")["upsert"][0]
        assert (done["ready"], done["total"]) == (2, 2)
    page = request(server.url + "/content")
    assert page.status == 200 and f'href="/jobs/local/{job.job_id}"' in page.body and "Succeeded" in page.body


def test_jobs_table_stream_sends_only_the_rows_that_changed(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    """The page's first live update changes nothing when nothing changed since it was rendered; later ones
    carry only the rows that changed, and the order only when a job came or went."""
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    quiet = gated_job(local, tmp_path / "a", gates=1, name="quiet")
    busy = gated_job(local, tmp_path / "b", gates=1, name="busy")
    try:
        page = request(server.url + "/content")
        [address] = EVENTS.findall(page.body)
        assert address.startswith("/events?have=")
        with Events(server.url + address.replace("&amp;", "&")) as events:
            nothing = events.until("jobs")
            assert (nothing["upsert"], nothing["order"], nothing["html"]) == ([], None, {})
            local.resume(busy.job_id)
            running = events.until("jobs", lambda d: d["upsert"] and d["upsert"][0]["ready"] == 2)
            assert {r["id"] for r in running["upsert"]} == {busy.job_id} and running["order"] is None
            local.delete(quiet.job_id)
            gone = events.until("jobs", lambda d: d["order"] is not None)
            assert gone["order"] == [f"local/{busy.job_id}"] and gone["upsert"] == []
        # A page rendered before the table changed (its digest no longer matches) is sent every row.
        with Events(server.url + address.replace("&amp;", "&")) as events:
            first = events.until("jobs")
            assert [r["id"] for r in first["upsert"]] == [busy.job_id] and first["order"] == [f"local/{busy.job_id}"]
    finally:
        release(busy)
        release(quiet)


def test_job_page_status_logs_metrics_and_escaping(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    job = gated_job(local, tmp_path, gates=2)
    href = f"{server.url}/jobs/local/{job.job_id}"
    try:
        with Events(href + "/events") as events:
            first = events.until("status")
            assert first["row"]["phase"] == "Suspended"
            assert [(r["role"], r["index"], r["phase"]) for r in first["replicas"]] == [
                ("worker", 0, "Pending"),
                ("worker", 1, "Pending"),
            ]
            assert "resume" in first["actions"] and "suspend" not in first["actions"]
            local.resume(job.job_id)
            # The supervisor records the replicas Running, then the job: both are awaited.
            events.until(
                "status",
                lambda d: d["row"]["phase"] == "Running" and all(r["phase"] == "Running" for r in d["replicas"]),
            )
            metrics = events.until("metrics", lambda d: d["names"] == ["loss"] and d["samples"] == 10)
        plot = request(f"{href}/plot.svg?name=loss&x=step&v={metrics['version']}")
        assert plot.status == 200 and plot.headers["content-type"].startswith("image/svg+xml")
        assert plot.body.count('data-points="5"') == 2, plot.body  # a line per replica, five steps each
        assert ">worker-0 0.2<" in plot.body and ">worker-1 0.3<" in plot.body  # the legend's latest values
        job.open_gate(0)
        job.open_gate(1)
        assert local.status(job.job_id).phase in (JobPhase.RUNNING, JobPhase.SUCCEEDED)
        lines = lines_of(log_events(href + "/events?role=worker&index=1"))
        assert {key for key, _ in lines} == {"worker-1"}
        assert (("worker-1", XSS)) in lines and ("worker-1", "replica 1 step 9") in lines
        tail = lines_of(log_events(href + "/events?tail=1"))
        assert sorted(tail) == [("worker-0", "replica 0 step 9"), ("worker-1", "replica 1 step 9")]
        # The page asks for a plot when the stream says the metrics moved (`version`): the server follows the
        # metrics files on their own thread, which may read the last samples after the log's last line.
        with Events(href + "/events") as events:
            ended = events.until("metrics", lambda d: d["samples"] == 20)
        svg = request(f"{href}/plot.svg?name=loss&x=time&v={ended['version']}").body
        assert svg.count('data-points="10"') == 2 and "loss by time" in svg
    finally:
        release(job)
    page = request(href + "/content")
    assert page.status == 200
    assert "<script>alert" not in page.body  # nothing from the job is markup


def test_job_page_holds_one_stream_for_status_metrics_and_its_filtered_log(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    """A browser opens at most 6 connections to one host across its tabs: the job page names one event stream,
    which carries the status, the metrics and the live log lines with the page's filters."""
    job = gated_job(local, tmp_path, gates=2)
    href = f"{server.url}/jobs/local/{job.job_id}"
    try:
        page = request(href + "/content")
        assert EVENTS.findall(page.body) == [f"/jobs/local/{job.job_id}/events"]
        assert "/logs" not in page.body
        local.resume(job.job_id)
        with Events(href + "/events?" + urlencode({"grep": "step [49]$"})) as events:
            got = gather(events, lines=2, samples=10)
            assert got["status"]["row"]["id"] == job.job_id
            assert sorted(got["lines"]) == [("worker-0", "replica 0 step 4"), ("worker-1", "replica 1 step 4")]
            job.open_gate(0)  # the job goes on: its new lines come on the same stream, still filtered
            more = gather(events, lines=2, samples=20)
            assert sorted(more["lines"]) == [("worker-0", "replica 0 step 9"), ("worker-1", "replica 1 step 9")]
            assert more["metrics"]["names"] == ["loss"]
        # A wrong filter is said in the page's words (its fields, not the CLI's flags), field first.
        for bad, said in (
            ("grep=(", "grep: not a regular expression (missing ), unterminated subpattern at position 0): '('"),
            ("role=worker&index=one", "index: give a replica's index, a whole number from 0 (got 'one')"),
            ("index=1", "index: choose a role too (an index counts the replicas of one role)"),
            ("tail=-1", "tail: give how many of the last lines to show, a whole number from 0 (got '-1')"),
        ):
            with Events(f"{href}/events?{bad}") as events:
                event, data = next(iter(events))
                assert (event, data["message"]) == ("failed", said), bad
                assert events.until("status")["row"]["phase"] == "Running"  # the page's status goes on
    finally:
        release(job)


def test_failure_summary_is_escaped_on_the_page(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(f"import sys\nprint({XSS!r})\nsys.exit(3)\n")
    from kubetrain.jobspec import from_dict

    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "boom"},
        "spec": {"framework": "generic", "replicas": 1, "run": {"exec": [sys.executable, str(script)]}},
    }
    result = local.run(from_dict(doc))
    assert result.status is not None and result.status.phase is JobPhase.FAILED
    page = request(f"{server.url}/jobs/local/{result.job_id}/content")
    assert "worker-0 exited with code 3" in page.body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.body and XSS not in page.body
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_actions_need_the_token_and_this_origin(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    """An action needs the token in its header, which a page elsewhere cannot send without a CORS preflight
    (never granted); and a browser that says the request comes from elsewhere is refused too."""
    job = gated_job(local, tmp_path, gates=1)
    href = f"{server.url}/jobs/local/{job.job_id}"
    host = f"127.0.0.1:{server.port}"
    refused = [
        request(href + "/cancel", "POST", auth=False),
        request(href + "/cancel", "POST", {"Authorization": "Bearer " + "x" * 43}, auth=False),
        request(href + "/cancel", "POST", {"Authorization": f"Basic {TOKEN}"}, auth=False),
        request(href + "/cancel", "OPTIONS", {"Origin": "http://evil.example"}, auth=False),  # a preflight
        request(href + "/cancel", "POST", {"Origin": "http://evil.example"}),
        request(href + "/cancel", "POST", {"Sec-Fetch-Site": "cross-site"}),
        request(href + "/cancel", "POST", {"Origin": "null"}),
    ]
    assert [r.status for r in refused] == [401, 401, 401, 401, 403, 403, 403]
    assert not any("access-control-allow-origin" in r.headers for r in refused)
    assert local.status(job.job_id).phase is JobPhase.SUSPENDED
    ok = request(href + "/cancel", "POST", {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"})
    assert ok.status == 200 and ok.json()["phase"] == "Cancelled"
    assert local.status(job.job_id).phase is JobPhase.CANCELLED
    again = request(href + "/resume", "POST")  # a script: no Origin, no Sec-Fetch-Site
    assert again.status == 409 and "Cancelled" in again.json()["error"]
    gone = request(href + "/delete", "POST")
    assert gone.json()["phase"] == "Deleted" and local.list() == []


def test_host_header_of_another_name_is_refused_on_loopback(server: Background) -> None:
    """A page elsewhere reaching 127.0.0.1 through a DNS name of its own (rebinding) is refused."""
    for path in ("/", "/content", "/api/jobs"):
        assert request(server.url + path, headers={"Host": "attacker.example:80"}).status == 403, path
        assert request(server.url + path, headers={"Host": f"localhost:{server.port}"}).status == 200, path


def test_every_address_requires_the_token(local: LocalBackend) -> None:
    """Loopback too (as Jupyter): other users of the machine reach 127.0.0.1; each start makes a fresh token
    unless one is given. The page addresses answer anyone, with the layout only."""
    for host in ("127.0.0.1", "0.0.0.0", "192.168.1.5"):
        assert len(Guard.for_bind(host, 1).token) >= 32
    assert Guard.for_bind("127.0.0.1", 1).token != Guard.for_bind("127.0.0.1", 1).token
    with Background([local], host="0.0.0.0") as bg:
        url = f"http://127.0.0.1:{bg.port}"
        token = bg.guard.token
        for path in ("/content", "/events", "/api/jobs", "/jobs/local/x/detail.json", "/jobs/local/x/events"):
            refused = request(url + path, auth=False)
            assert refused.status == 401, path
            assert refused.headers["www-authenticate"] == 'Bearer realm="kubetrain ui"'
            assert "open the address kubetrain ui printed at start" in refused.body
            assert request(url + path + "?token=" + token, auth=False).status == 401, path  # not in a query
        assert request(url + "/", auth=False).status == 200
        assert request(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"}).json() == {
            "jobs": [],
            "errors": [],
        }


def test_cli_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "starlette"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "ui"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "error: kubetrain ui needs starlette: pip install 'kubetrain[ui]'"
