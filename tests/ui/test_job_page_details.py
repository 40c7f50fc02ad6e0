"""Small things a job's page must say right: the crashed rank's reason beside the rank stopped because of it,
each replica's restarts, a plot's alt text after its axis changed (and the axes kept in the address), and
"no metrics" said of an ended job as of an ended job.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.server import Background
from tests.support.helpers import make_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, request

CRASH = """
import os, sys, time
if os.environ["KUBETRAIN_REPLICA_INDEX"] == "1":
    sys.exit(3)
time.sleep(60)  # stopped when its peer fails
"""

REPLICAS = "return [...document.querySelectorAll('#replica-rows tr')].map(r => [...r.cells].map(c => c.innerText))"


def test_the_crashed_rank_has_a_reason_beside_the_stopped_one_and_restarts_are_per_replica(
    browser: Any, server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "crash.py").write_text(CRASH)
    run = {"exec": [sys.executable, str(tmp_path / "crash.py")]}
    crashed = local.run(make_job({"framework": "generic", "replicas": 2, "run": run}, "crash")).job_id
    detail = request(f"{server.url}/jobs/local/{crashed}/detail.json").json()
    assert [(r["index"], r["exit"], r["reason"]) for r in detail["replicas"]] == [
        (0, "stopped (SIGTERM)", "Stopped"),
        (1, "exit code 3", "Error"),  # as Kubernetes says of a container that failed of itself
    ]
    always = {"exec": [sys.executable, "-c", "import sys; sys.exit(3)"]}
    job = make_job({"framework": "generic", "replicas": 2, "run": always, "runPolicy": {"backoffLimit": 2}}, "again")
    restarted = local.run(job).job_id
    browser.get(server.address(f"/jobs/local/{restarted}"))
    until(browser, "the replicas", lambda d: len(d.execute_script(REPLICAS)) == 2)
    rows = browser.execute_script(REPLICAS)
    assert [(r[0], r[1], r[4]) for r in rows] == [("worker", "0", "2"), ("worker", "1", "2")]
    assert text(browser, "#restarts") == "2"


METRIC = "import kubetrain.metrics as m\nfor s in range(5): m.log(step=s, loss=1.0 / (s + 1))\n"

ALT = "return [...document.querySelectorAll('#metrics img.plot')].map(i => [i.alt, i.complete && i.naturalWidth > 0])"


def test_a_plots_alt_follows_its_axes_which_the_address_keeps(
    browser: Any, server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "metric.py").write_text(METRIC)
    run = {"exec": [sys.executable, str(tmp_path / "metric.py")]}
    job_id = local.run(make_job({"framework": "generic", "replicas": 1, "run": run}, "metric")).job_id
    browser.get(server.address(f"/jobs/local/{job_id}"))
    until(browser, "the plot", lambda d: d.execute_script(ALT) == [["loss by step", True]])
    Select(browser.find_element(By.ID, "metric-x")).select_by_value("time")
    until(browser, "the plot by time", lambda d: d.execute_script(ALT) == [["loss by time", True]])
    Select(browser.find_element(By.ID, "metric-scale")).select_by_value("log")
    by_time_log = [["loss by time, log scale", True]]
    until(browser, "the plot by time, log scale", lambda d: d.execute_script(ALT) == by_time_log)
    assert parse_qs(urlsplit(browser.current_url).query) == {"x": ["time"], "scale": ["log"]}
    browser.refresh()
    until(browser, "the same plot after a reload", lambda d: d.execute_script(ALT) == by_time_log)
    assert browser.find_element(By.ID, "metric-x").get_attribute("value") == "time"


def test_an_ended_job_without_metrics_says_it_logged_none(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    with Background([local], token=TOKEN) as bg:
        run = {"exec": [sys.executable, "-c", "print('no metrics here')"]}
        job_id = local.run(make_job({"framework": "generic", "replicas": 1, "run": run}, "quiet")).job_id
        browser.get(bg.address(f"/jobs/local/{job_id}"))
        until(browser, "the page", lambda d: "end of output" in text(d, "#log"))
        assert text(browser, "#no-metrics") == "This job logged no metrics."
