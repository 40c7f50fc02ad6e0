"""Many viewers of a big log, on a real server over a real job's output: a page that reads slowly costs a
bounded buffer (its reader waits, no line is dropped), and past `--max-log-viewers` pages reading a log at
once the next one waits its turn, told so, while its status comes at once.

A slow viewer is a stream whose client stops reading after its first `lines` event: the server's socket
buffers fill and uvicorn waits for them to drain. Every wait is for a condition (`wait_for`), never a sleep."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.connections import LOG_BUFFER_LINES, ConnectionLimits
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind, wait_for  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, Events, gated_job, release

LINES = 100_000
BIG = f"""import sys
pad = "x" * 200
sys.stdout.write("".join(f"line {{i:>6}} {{pad}}\\n" for i in range({LINES})))
"""
"""20 MB of output: more than the sockets between a server and its viewer hold (a few MB on loopback)."""


@pytest.fixture
def big_log(local: LocalBackend, tmp_path: Path) -> str:
    """A finished one-replica job whose output is LINES lines."""
    script = tmp_path / "big.py"
    script.write_text(BIG)
    result = local.run(exec_job([sys.executable, str(script)], "big"))
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    return result.job_id


def stalled(bg: Background, job_id: str) -> Events:
    """A viewer that has its status and its first lines, then reads nothing more."""
    events = Events(f"{bg.url}/jobs/local/{job_id}/events")
    events.until("lines")
    return events


def count_to_end(events: Events) -> tuple[int, list[str]]:
    """Every line the stream sends until its log ends, and the names of its events before that."""
    lines, names = 0, []
    for event, data in events:
        names.append(event)
        if event == "lines":
            lines += len(data)
        if event in ("end", "failed"):
            return lines, names
    raise AssertionError("the stream ended before its log did")


def test_a_slow_viewer_costs_a_bounded_buffer_and_loses_no_line(local: LocalBackend, big_log: str) -> None:
    with Background([local], token=TOKEN) as bg:
        viewers = [stalled(bg, big_log) for _ in range(3)]
        try:
            # Each reader runs until its buffer is full or the log has ended (it had no bound: the whole
            # log, up to 200,000 lines per viewer, then the oldest dropped).
            pipes = wait_for("3 readers", lambda: list(bg.view.pipes) if len(bg.view.pipes) == 3 else None)
            wait_for(
                "every reader to fill its buffer or end",
                lambda: all(len(p.items) >= LOG_BUFFER_LINES or p.done for p in pipes),
            )
            assert max(len(p.items) for p in pipes) <= LOG_BUFFER_LINES
            assert not any(p.done for p in pipes), "the readers wait for their viewers, not read on"
            # Read late, every line comes, none dropped.
            for viewer in viewers:
                more, _ = count_to_end(viewer)
                assert more > 0
        finally:
            for viewer in viewers:
                viewer.close()
        with Events(f"{bg.url}/jobs/local/{big_log}/events") as fresh:
            assert count_to_end(fresh)[0] == LINES


def test_past_the_cap_a_viewer_waits_its_turn_told_so(local: LocalBackend, big_log: str) -> None:
    with Background([local], token=TOKEN, limits=ConnectionLimits(log_viewers=2)) as bg:
        first, second = stalled(bg, big_log), stalled(bg, big_log)
        third = Events(f"{bg.url}/jobs/local/{big_log}/events")
        try:
            names = []
            for event, data in third:
                names.append(event)
                assert event != "lines", "a third reader started past a cap of 2"
                if event == "waiting":
                    assert "2 pages are reading logs at once" in data["message"]
                    assert "--max-log-viewers" in data["message"]
                if event == "status":  # the page is live meanwhile
                    break
            assert "waiting" in names
            first.close()  # its turn comes
            lines, names = count_to_end(third)
            assert lines == LINES and names[-1] == "end"
        finally:
            for viewer in (first, second, third):
                viewer.close()
        # Every reader left counts no more: a new viewer reads at once.
        wait_for("the readers to leave", lambda: bg.view.readers.reading == 0)
        with Events(f"{bg.url}/jobs/local/{big_log}/events") as fresh:
            assert count_to_end(fresh)[0] == LINES


def test_readers_take_turns_and_a_reader_waiting_for_its_page_gives_its_turn(
    local: LocalBackend, big_log: str
) -> None:
    """One reader at a time (`log_readers=1`): three pages that stop reading each got their first lines, so
    a reader whose page holds its buffer full gave its turn to the next; and all three read to the end."""
    with Background([local], token=TOKEN, limits=ConnectionLimits(log_readers=1)) as bg:
        viewers = [stalled(bg, big_log) for _ in range(3)]
        try:
            assert bg.view.turns.limit == 1
            for viewer in viewers:
                assert count_to_end(viewer)[1][-1] == "end"
        finally:
            for viewer in viewers:
                viewer.close()


def test_a_reader_at_the_end_of_a_running_jobs_output_takes_no_turn(
    local: LocalBackend, big_log: str, tmp_path: Path
) -> None:
    """One reader at a time: a page following a running job that prints nothing more holds its reader at
    the end of the output; another page's log still comes."""
    job = gated_job(local, tmp_path, gates=1)
    with Background([local], token=TOKEN, limits=ConnectionLimits(log_readers=1)) as bg:
        try:
            local.resume(job.job_id)
            with Events(f"{bg.url}/jobs/local/{job.job_id}/events") as follower:
                follower.until("lines")  # at the end of its output: waiting for a next line
                with Events(f"{bg.url}/jobs/local/{big_log}/events") as other:
                    lines, names = count_to_end(other)
                    assert lines == LINES and names[-1] == "end"
        finally:
            release(job)


def test_the_page_says_its_log_waits_its_turn_then_shows_it(browser: Any, local: LocalBackend, big_log: str) -> None:
    """In chromium: past the cap, the page shows the job at once and says above the log why it is empty;
    once the page reading the log goes, the log comes, every line, and the note goes."""
    with Background([local], token=TOKEN, limits=ConnectionLimits(log_viewers=1)) as bg:
        holder = stalled(bg, big_log)
        try:
            browser.get(bg.address(f"/jobs/local/{big_log}"))
            until(browser, "the job's status", lambda d: "Succeeded" in text(d, "#job-head"))
            note = until(browser, "the note that the log waits", lambda d: text(d, "#log-note"))
            assert "waiting to read the log: 1 page is reading a log at once" in note
            assert "--max-log-viewers" in note
            assert text(browser, "#log-count") == ""
        finally:
            holder.close()
        until(browser, "the whole log", lambda d: text(d, "#log-count") == f"{LINES} lines")
        until(browser, "the note gone", lambda d: not d.find_element(By.ID, "log-note").is_displayed())
