"""The job page's log and plots in a real browser (Debian's chromium, headless, driven by selenium): "keep at
the end" reaches the end of a 100,000-line log, also of one that streamed below the fold, a scroll up by hand
pauses it and checking it again returns there; a metric named `eval/loss` plots by a linear and a log scale.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind, wait_phase  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, request

LINES = 100_000


def finished_job(local: LocalBackend, tmp: Path, name: str, script: str) -> str:
    """A one-replica job run to its end."""
    path = tmp / f"{name}.py"
    path.write_text(script)
    job = exec_job([sys.executable, str(path)], name)
    result = local.run(job)
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    return result.job_id


# Where the log box is, read in one script run: scrolled to its end, and the text of the last line drawn and
# whether it lies inside the box's visible area (its row's rectangle, within the box's client area).
# The page's content comes after its layout (fetched with the token): until then there is no box.
LOG_VIEW = """
const box = document.getElementById('log');
if (!box) return {atEnd: false, line: '', visible: false, follow: false, ended: false};  // content not loaded yet
const rows = box.querySelectorAll('.ln');
const last = rows[rows.length - 1];
let line = '', visible = false;
if (last) {
  line = last.querySelector('.k').textContent + ' ' + last.querySelector('.t').textContent;
  const r = last.getBoundingClientRect(), b = box.getBoundingClientRect();
  const inner = b.top + box.clientTop;
  visible = r.height > 0 && r.top >= inner - 1 && r.bottom <= inner + box.clientHeight + 1;
}
return {
  atEnd: box.scrollTop + box.clientHeight >= box.scrollHeight - 2,
  top: box.scrollTop, height: box.scrollHeight, client: box.clientHeight,
  line: line, visible: visible, follow: document.getElementById('log-follow').checked,
  ended: !!box.querySelector('.log-end'),
};
"""


def stream_open(driver: Any) -> bool:
    return bool(driver.find_element(By.ID, "live").get_attribute("class") == "live on")


def log_view(driver: Any) -> dict[str, Any]:
    return dict(driver.execute_script(LOG_VIEW))


def shows_the_end(driver: Any) -> bool:
    view = log_view(driver)
    return bool(view["atEnd"] and view["visible"] and view["line"].startswith(f"[worker-0] line {LINES - 1}"))


LONG = f"import sys\nsys.stdout.write(''.join(f'line {{i}}\\n' for i in range({LINES})))\n"
"""A replica that prints LINES lines and ends."""


def test_keep_at_the_end_reaches_the_end_of_a_long_log(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    job_id = finished_job(local, tmp_path, "long", LONG)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job_id}"))
        until(browser, "the end of the output", lambda d: log_view(d)["ended"])
        assert text(browser, "#log-count") == f"{LINES} lines"
        assert log_view(browser)["follow"]
        until(browser, "the log box at its end, its last line in view", shows_the_end)


def test_a_scroll_up_by_hand_pauses_following_and_checking_again_returns_to_the_end(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    job_id = finished_job(local, tmp_path, "long", LONG)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job_id}"))
        until(browser, "the end of the output, in view", lambda d: log_view(d)["ended"] and shows_the_end(d))
        box = browser.find_element(By.ID, "log")
        ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(box), 0, -2000).perform()
        # The wheel pauses following at once; the box then scrolls (smoothly, at the browser's pace) and is left
        # where the user scrolled to.
        until(browser, "following paused, the box left above its end",
              lambda d: not log_view(d)["follow"] and not log_view(d)["atEnd"])
        browser.find_element(By.ID, "log-follow").click()
        until(browser, "back at the end", shows_the_end)


# Waits at a gate (a FIFO: opening it blocks until the test opens it for writing), then prints the lines
# fast, of varied lengths, while the page is open and following. Under the 10 MiB at which a replica's log
# file is rotated: this test is about the page, not about following a log across a rotation.
LIVE = """
import sys
open(sys.argv[1]).read()
for i in range({lines}):
    print(f"line {{i}} " + "x" * (i % 40), flush=i % 500 == 0)
"""


BELOW_THE_FOLD = "return document.getElementById('log').getBoundingClientRect().top > window.innerHeight"


def test_keep_at_the_end_holds_when_the_page_is_scrolled_to_a_live_log(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    """The log box below the fold while the lines stream (no frame draws it until it is in view): once the
    page is scrolled to show it, the view is at the end of the output, its last line in view."""
    script, gate = tmp_path / "live.py", tmp_path / "gate"
    script.write_text(LIVE.format(lines=LINES))
    os.mkfifo(gate)
    job = exec_job([sys.executable, str(script), str(gate)], "live")
    job_id = local.run(job, detach=True).job_id
    size = browser.get_window_size()
    try:
        browser.set_window_size(1280, 600)
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job_id}"))
            until(browser, "the stream open", stream_open)
            assert browser.execute_script(BELOW_THE_FOLD)
            os.close(os.open(gate, os.O_WRONLY))  # the replica starts printing
            until(browser, "the end of the output", lambda d: log_view(d)["ended"])
            assert text(browser, "#log-count") == f"{LINES} lines"
            browser.execute_script("document.getElementById('log').scrollIntoView()")
            until(browser, "the log box at its end, its last line in view", shows_the_end)
        wait_phase(job_id, JobPhase.SUCCEEDED)
    finally:
        browser.set_window_size(size["width"], size["height"])
        with contextlib.suppress(OSError):  # a test failed before the replica passed its gate
            os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))


METRIC = """
import kubetrain.metrics as m
for step in range(6):
    m.log(step=step, **{"eval/loss": 10.0 ** -step})
"""

PLOT = """
const i = document.querySelector('#metrics img.plot[data-metric="eval/loss"]');
return i ? {src: i.dataset.src ? new URL(i.dataset.src, location.href).href : null,
            loaded: i.complete && i.naturalWidth > 0} : null;
"""


def plot(driver: Any) -> dict[str, Any] | None:
    """The address the eval/loss plot's picture was fetched from and whether it has loaded (a broken one has no
    width)."""
    found = driver.execute_script(PLOT)
    return dict(found) if found else None


def test_a_metric_named_with_a_slash_plots_by_linear_and_log_scale(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    job_id = finished_job(local, tmp_path, "evals", METRIC)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job_id}"))
        linear = until(browser, "the eval/loss plot loaded", lambda d: (p := plot(d)) and p["loaded"] and p)
        assert parse_qs(urlsplit(linear["src"]).query)["scale"] == ["linear"]
        assert "eval/loss by step<" in request(linear["src"]).body
        Select(browser.find_element(By.ID, "metric-scale")).select_by_value("log")
        log = until(
            browser,
            "the plot by log scale loaded",
            lambda d: (p := plot(d)) and p["src"] != linear["src"] and p["loaded"] and p,
        )
        assert parse_qs(urlsplit(log["src"]).query)["scale"] == ["log"]
        body = request(log["src"]).body
        assert "eval/loss by step, log scale<" in body and 'data-points="6"' in body
