"""The job page in a real browser (Debian's chromium, headless, driven by selenium) when things go wrong or
fast: a job logging every 20 ms does not make the page fetch its plots on every change, yet the page ends
showing the latest samples; a refusal from the server is shown as its text, and a server restarted with a
new token is said plainly; a job deleted while its page is open stops looking alive; an action's result
line gives way to the next status.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    exec_job,
    no_process_left_behind,
    supervisor_arrives_after_first_look,
    wait_phase,
)
from tests.ui.browsing import WAIT, text, until
from tests.ui.helpers import TOKEN, Events, gated_job, release

RESTARTED = "the server restarted with a new token: open the address it printed at start"
NEW_TOKEN = "a-new-token-of-a-restarted-server_0123456789"


def buttons(driver: Any) -> dict[str, bool]:
    """Each action button: enabled or not."""
    pairs = driver.execute_script(
        "return [...document.querySelectorAll('button.action')].map(b => [b.dataset.action, !b.disabled])"
    )
    return {str(a): bool(b) for a, b in pairs}


def click_confirmed(driver: Any, action: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'button[data-action="{action}"]').click()
    WebDriverWait(driver, WAIT).until(expected_conditions.alert_is_present()).accept()


# -- plots: a fast job ------------------------------------------------------------------------------------

NAMES = ["loss", "acc", "lr", "grad_norm", "tokens"]
STEPS = 250

# Logs step 0 and waits at its first gate (so the page opens on five plots), then logs five metrics every
# 20 ms for STEPS steps and waits at its second gate (a FIFO each: its open blocks until the test opens it).
FAST = """
import sys, time
import kubetrain.metrics as m
names = {names!r}
m.log(step=0, **{{n: 1.0 for n in names}})
open(sys.argv[1]).read()
for step in range(1, {steps} + 1):
    m.log(step=step, **{{n: 1.0 / (step + 1) for n in names}})
    time.sleep(0.02)
open(sys.argv[2]).read()
"""

SHOWN = """
return [...document.querySelectorAll('#metrics img.plot')].map(
  i => [i.dataset.metric, i.complete && i.naturalWidth > 0,
        i.dataset.src ? new URL(i.dataset.src, location.href).searchParams.get('v') : null])
"""

PLOT_REQUESTS = """
return performance.getEntriesByType('resource')
  .filter(e => e.name.includes('/plot.svg?')).map(e => [e.name, e.startTime])
"""


def fast_job(local: LocalBackend, tmp: Path) -> tuple[str, list[Path]]:
    script = tmp / "fast.py"
    script.write_text(FAST.format(names=NAMES, steps=STEPS))
    gates = [tmp / "gate0", tmp / "gate1"]
    for gate in gates:
        os.mkfifo(gate)
    job = exec_job([sys.executable, str(script), *map(str, gates)], "fast")
    return local.run(job, detach=True).job_id, gates


def open_gate(gate: Path) -> None:
    os.close(os.open(gate, os.O_WRONLY))  # returns once the replica waits there


def test_a_fast_job_redraws_each_plot_at_most_every_two_seconds_and_last_with_its_latest_samples(
    browser: Any, tmp_path: Path
) -> None:
    local = LocalBackend()
    job_id, gates = fast_job(local, tmp_path)
    try:
        with Background([local], token=TOKEN) as bg:
            href = f"{bg.url}/jobs/local/{job_id}"
            with Events(href + "/events") as events:
                events.until("metrics", lambda d: d["samples"] == len(NAMES))
            browser.get(bg.address(f"/jobs/local/{job_id}"))
            until(browser, "five plots", lambda d: len(d.execute_script(SHOWN)) == len(NAMES))
            browser.execute_script("performance.setResourceTimingBufferSize(100000)")
            with Events(href + "/events") as events:
                open_gate(gates[0])  # five metrics every 20 ms, for a few seconds
                last = events.until("metrics", lambda d: d["samples"] == len(NAMES) * (STEPS + 1))["version"]

            # The trailing redraw: every plot shown ends as asked for after the last sample arrived.
            def latest_shown(driver: Any) -> bool:
                shown = driver.execute_script(SHOWN)
                return len(shown) == len(NAMES) and all(ok and v is not None and int(v) >= last for _n, ok, v in shown)

            until(browser, "every plot drawn with the latest samples", latest_shown)

            # Bursts collapse: a plot's image was asked for at most once per two seconds (a bound the page
            # sets itself, so a slow machine only spaces the requests further apart).
            asked: dict[str, list[float]] = defaultdict(list)
            for url, start in browser.execute_script(PLOT_REQUESTS):
                asked[parse_qs(urlsplit(url).query)["name"][0]].append(float(start))
            assert sorted(asked) == sorted(NAMES)
            for name, times in asked.items():
                gaps = [b - a for a, b in itertools.pairwise(times)]
                assert len(times) >= 2, (name, times)  # redrawn while the job logged
                assert min(gaps) >= 1500, (name, [round(g) for g in gaps])
        open_gate(gates[1])
        wait_phase(job_id, JobPhase.SUCCEEDED)
    finally:
        for gate in gates:  # a gate not yet opened, with its reader there, is opened
            with contextlib.suppress(OSError):
                os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))
        if not local.status(job_id).phase.is_terminal:  # a test stopped early leaves no job running
            local.cancel(job_id)
        local.close()


# -- a restarted server --------------------------------------------------------------------------------


def test_an_action_refused_with_plain_text_shows_that_text(browser: Any, tmp_path: Path) -> None:
    """The server restarted with a new token while the page was open: the page's action is refused with a
    plain-text 401, which the page shows as the server wrote it, and it says the server restarted."""
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=1)  # Suspended: resume is allowed
    try:
        with Background([local], token=TOKEN) as first:
            port = first.port
            browser.get(first.address(f"/jobs/local/{job.job_id}"))
            until(browser, "the job page", lambda d: text(d, "#phase") == "Suspended")
            until(browser, "live", lambda d: d.find_element(By.ID, "live").get_attribute("class") == "live on")
        with Background([local], port=port, token=NEW_TOKEN):
            click_confirmed(browser, "resume")
            until(
                browser,
                "the refusal's text",
                lambda d: text(d, "#action-result").startswith("kubetrain ui: this needs the page's token"),
            )
            until(browser, "the restart said", lambda d: text(d, "#notice") == RESTARTED)
            assert buttons(browser)["resume"]  # nothing happened: it can be tried again with the new address
        assert local.status(job.job_id).phase is JobPhase.SUSPENDED
    finally:
        release(job)
        local.close()


def test_a_page_follows_its_server_again_after_a_restart_with_the_same_token(browser: Any, tmp_path: Path) -> None:
    """The page's stream (read with fetch, which does not reconnect by itself as EventSource does) connects
    again once its server is back with the same token (a kept one), and shows what happened since."""
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=2)
    try:
        local.resume(job.job_id)
        with Background([local], token=TOKEN) as first:
            port = first.port
            browser.get(first.address(f"/jobs/local/{job.job_id}"))
            until(browser, "the log", lambda d: "replica 1 step 4" in text(d, "#log"))
        until(browser, "not live", lambda d: d.find_element(By.ID, "live").get_attribute("class") == "live")
        job.open_gate(0)  # five more steps while no server runs
        with Background([local], port=port, token=TOKEN):
            until(browser, "the log since the restart", lambda d: "replica 1 step 9" in text(d, "#log"))
            until(browser, "live again", lambda d: d.find_element(By.ID, "live").get_attribute("class") == "live on")
            assert not browser.find_element(By.ID, "notice").is_displayed()
    finally:
        release(job)
        local.close()


def test_a_resumed_job_s_page_follows_it_when_its_supervisor_records_itself_as_resume_looks(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`resume` looks at the job as its new supervisor records itself. A look that read no record, then the record
    of a supervisor it had not checked, took it for dead: the job was recorded Failed (SupervisorLost) while its
    supervisor ran it, and the page stopped following its log (an ended job's log grows no more)."""
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=2)
    try:
        with supervisor_arrives_after_first_look(monkeypatch, local) as first:
            local.resume(job.job_id)
        assert first == [None]
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job.job_id}"))
            until(browser, "the log", lambda d: "replica 1 step 4" in text(d, "#log"))
            job.open_gate(0)
            until(browser, "the log that follows", lambda d: "replica 1 step 9" in text(d, "#log"))
            assert text(browser, "#phase") == "Running"
    finally:
        release(job)
        local.close()


def test_a_server_restarted_with_a_new_token_is_said_on_the_page(browser: Any, tmp_path: Path) -> None:
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=1)
    try:
        with Background([local], token=TOKEN) as first:
            port = first.port
            browser.get(first.address(f"/jobs/local/{job.job_id}"))
            until(browser, "live", lambda d: d.find_element(By.ID, "live").get_attribute("class") == "live on")
            assert not browser.find_element(By.ID, "notice").is_displayed()
        with Background([local], port=port, token=NEW_TOKEN):
            # The page's stream reconnects by itself, is refused (403), and the page says why.
            until(browser, "the restart said", lambda d: text(d, "#notice") == RESTARTED)
            assert browser.find_element(By.ID, "live").get_attribute("class") == "live"
    finally:
        release(job)
        local.close()


# -- a deleted job, an action's result ----------------------------------------------------------------------


def test_a_job_deleted_while_its_page_is_open_stops_looking_alive(browser: Any, tmp_path: Path) -> None:
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=1)
    try:
        local.resume(job.job_id)
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job.job_id}"))
            until(browser, "Running", lambda d: text(d, "#phase") == "Running")
            until(browser, "the log", lambda d: "replica 1 step 4" in text(d, "#log"))
            assert buttons(browser)["cancel"]
            local.delete(job.job_id)
            # A local delete stops the replicas first: a page that saw the job end Cancelled on the way keeps
            # that phase (as after a cancel on a cluster, which deletes the job); either way it is shown gone.
            until(browser, "the job shown gone", lambda d: "the job is gone" in text(d, "#log"))
            assert text(browser, "#phase") in ("Deleted", "Cancelled")
            assert not any(buttons(browser).values()), buttons(browser)
            assert browser.find_element(By.ID, "live").get_attribute("class") == "live"
            assert "the job is gone" in text(browser, "#log")
            assert text(browser, "#message") != ""
    finally:
        release(job)
        local.close()


def test_an_actions_result_gives_way_to_the_next_status(browser: Any, tmp_path: Path) -> None:
    """ "resume: Pending" (the backend's answer) does not stay beside a job that is Running by now."""
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=1)
    try:
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job.job_id}"))
            until(browser, "the job page", lambda d: text(d, "#phase") == "Suspended")
            click_confirmed(browser, "resume")
            until(browser, "Running", lambda d: text(d, "#phase") == "Running")
            until(browser, "the result line cleared", lambda d: text(d, "#action-result") == "")
            assert buttons(browser) == {"cancel": True, "suspend": True, "resume": False, "delete": True}
    finally:
        release(job)
        local.close()
