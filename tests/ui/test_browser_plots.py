"""The interactive plot, in Debian's chromium: hover reads each line's value at the cursor, a drag zooms and
a double click zooms back out, smoothing changes the values drawn (TensorBoard's debiased moving average),
the plot and its controls live in the address (a reload shows the same), and a restarted job's attempts are
lines of their own: none is drawn across the downtime."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui import app as app_module
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, make_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, gated_job
from tests.ui.test_layout import OVERFLOW, PHONE, desktop, phone, violations

STEPS = 50
TRAIN = f"""
import os
import kubetrain.metrics as m
i = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
for step in range({STEPS}):
    m.log(step=step, loss=(i + 1) * 100.0 / (step + 1))
"""


def loss(index: int, step: int) -> float:
    return (index + 1) * 100.0 / (step + 1)


def ema(values: list[float], weight: float) -> float:
    """TensorBoard's smoothing of the last of `values`: moving average, divided by the weights' sum."""
    last = 0.0
    for v in values:
        last = last * weight + (1 - weight) * v
    return last / (1 - weight ** len(values))


def shown(value: float) -> str:
    """As the page writes a value (5 significant digits, no trailing zeros)."""
    return f"{float(f'{value:.5g}'):g}" if 1e-3 <= abs(value) < 1e5 else f"{value:.3e}"


LEGEND = """
return [...document.querySelectorAll('#explore-plot .u-legend .u-series')].map(
  r => [r.querySelector('.u-label').innerText, r.querySelector('.u-value').innerText]);
"""
RANGE = "const b = document.getElementById('explore-plot'); return [+b.dataset.xMin, +b.dataset.xMax];"


LOADED_SCRIPT = "return !!document.querySelector('#explore-plot[data-loaded] .u-over')"


def loaded(driver: Any) -> bool:
    return bool(driver.execute_script(LOADED_SCRIPT))


def over(driver: Any) -> Any:
    return driver.find_element("css selector", "#explore-plot .u-over")


def hover_step(driver: Any, step: float) -> dict[str, str]:
    """Moves the mouse over the plot where `step` is, and reads the legend (label → value)."""
    lo, hi = driver.execute_script(RANGE)
    box = over(driver)
    width = box.size["width"]
    dx = (step - lo) / (hi - lo) * width - width / 2  # offsets are from the element's centre
    ActionChains(driver).move_to_element_with_offset(box, round(dx), 0).perform()
    return dict(driver.execute_script(LEGEND))


def drag(driver: Any, start: float, end: float) -> None:
    """A drag across the plot from `start` to `end` (fractions of its width)."""
    box = over(driver)
    width = box.size["width"]
    chain = ActionChains(driver).move_to_element_with_offset(box, round((start - 0.5) * width), 0)
    chain.click_and_hold().move_by_offset(round((end - start) * width), 0).release().perform()


def click_picture(driver: Any) -> bool:
    """Clicks the loss picture once it is shown (the page replaces a picture when its newer one has loaded)."""
    try:
        driver.find_element("css selector", "#metrics img.plot[src^='blob:']").click()
        return True
    except (NoSuchElementException, StaleElementReferenceException):
        return False


def test_hover_zoom_smoothing_and_the_address(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    job = local.run(exec_job([sys.executable, str(tmp_path / "train.py")], "curves", replicas=2)).job_id
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job}"))
        until(browser, "the loss picture clicked", click_picture)
        until(browser, "the interactive plot", loaded)
        assert text(browser, "#explore-title") == "loss"
        assert browser.execute_script(RANGE) == [0, STEPS - 1]

        legend = hover_step(browser, 10)
        assert legend["step"] == "10", legend
        assert legend["worker-0"] == shown(loss(0, 10)) and legend["worker-1"] == shown(loss(1, 10)), legend

        drag(browser, 0.25, 0.75)
        lo, hi = until(
            browser, "a zoomed range", lambda d: d.execute_script(RANGE) != [0, STEPS - 1] and d.execute_script(RANGE)
        )
        assert 8 < lo < 16 and 33 < hi < 41, (lo, hi)
        assert "zoomed" in text(browser, "#explore-range")
        ActionChains(browser).double_click(over(browser)).perform()
        until(browser, "the whole range again", lambda d: d.execute_script(RANGE) == [0, STEPS - 1])

        browser.execute_script(
            "const s = document.querySelector('#explore-controls [name=smooth]');"
            "s.value = '0.9'; s.dispatchEvent(new Event('input', {bubbles: true}));"
        )
        until(browser, "the plot redrawn", loaded)
        legend = hover_step(browser, 10)
        assert legend["worker-0"] == shown(ema([loss(0, s) for s in range(11)], 0.9)), legend
        assert legend["worker-0"] != shown(loss(0, 10))

        query = browser.execute_script("return location.search")
        assert "plot=loss" in query and "smooth=0.9" in query, query
        browser.refresh()  # the token is kept by the origin's storage: the address alone reopens it
        until(browser, "the interactive plot after a reload", loaded)
        assert browser.execute_script("return document.querySelector('#explore-controls [name=smooth]').value") == "0.9"
        legend = hover_step(browser, 10)
        assert legend["worker-0"] == shown(ema([loss(0, s) for s in range(11)], 0.9)), legend

        assert violations(browser) == []  # the open plot, its controls and its legend
        try:
            phone(browser)
            browser.refresh()
            until(browser, "the interactive plot on a phone", loaded)
            got = browser.execute_script(OVERFLOW)
            assert got["page"] <= PHONE and got["out"] == [], got
        finally:
            desktop(browser)


RESTARTS = """
import os, sys, time
import kubetrain.metrics as m
marker = sys.argv[1]
first = not os.path.exists(marker)
open(marker, "a").close()
for step in range(1, 16 if first else 21):
    m.log(step=step, loss=1.0 / step)
sys.exit(3 if first else 0)
"""

# Per line (attempt) drawn: its label and the first and last x where it has a value, from the plot's data.
LINES = """
const u = document.getElementById('explore-plot').uplot;
return u.series.slice(1).map((s, i) => {
  const ys = u.data[i + 1], xs = u.data[0];
  const at = xs.filter((x, j) => ys[j] !== undefined && ys[j] !== null);
  return [s.label, at[0], at[at.length - 1], at.length];
});
"""


def test_a_restarted_jobs_attempts_are_lines_apart(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "restarts.py").write_text(RESTARTS)
    run = {"exec": [sys.executable, str(tmp_path / "restarts.py"), str(tmp_path / "marker")]}
    job = local.run(make_job({"framework": "generic", "run": run, "runPolicy": {"backoffLimit": 1}}, "again")).job_id
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job}?plot=loss&ex=relative&attempts=all"))
        until(browser, "the interactive plot", loaded)
        lines = browser.execute_script(LINES)
        assert [(label, n) for label, _, _, n in lines] == [("worker-0 attempt 1", 15), ("worker-0 attempt 2", 20)]
        (_, _, first_end, _), (_, second_start, _, _) = lines
        assert first_end < second_start  # attempt 1 ends before attempt 2 begins: no line between them
        # By default the latest attempt only.
        browser.get(bg.address(f"/jobs/local/{job}?plot=loss"))
        until(browser, "the interactive plot", loaded)
        assert [(label, n) for label, _, _, n in browser.execute_script(LINES)] == [("worker-0 attempt 2", 20)]


MANY = """
import kubetrain.metrics as m
for step in range(3):
    m.log(step=step, **{f"metric{i:03d}": i + step for i in range(300)})
"""

DRAWN = "return [...document.querySelectorAll('#metrics img.plot')].filter(i => i.src.startsWith('blob:')).length"


def test_only_the_pictures_near_the_view_are_fetched(
    browser: Any, local: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[str] = []
    real_plot = app_module.svg.plot

    def counted(samples: Any, name: str, *args: Any) -> str:
        served.append(name)
        return real_plot(samples, name, *args)

    monkeypatch.setattr(app_module.svg, "plot", counted)
    (tmp_path / "many.py").write_text(MANY)
    job = local.run(exec_job([sys.executable, str(tmp_path / "many.py")], "many")).job_id
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job}"))
        until(browser, "the first pictures", lambda d: d.execute_script(DRAWN) > 0)
        assert browser.execute_script("return document.querySelectorAll('#metrics img.plot').length") == 300
        # Straight to the last picture: those in between are never in view.
        browser.execute_script("document.querySelector('#metrics img.plot:last-child').scrollIntoView()")
        last = "return document.querySelector('#metrics img.plot:last-child').src.startsWith('blob:')"
        until(browser, "the last picture, once in view", lambda d: d.execute_script(last))
        assert "metric000" in served and "metric299" in served
        assert "metric150" not in served and len(set(served)) < 200, sorted(set(served))


def lr_job(local: LocalBackend, tmp: Path, name: str, scale: float) -> str:
    script = tmp / f"{name}.py"
    script.write_text(f"import kubetrain.metrics as m\nfor s in range(20): m.log(step=s, loss={scale} / (s + 1))\n")
    return local.run(exec_job([sys.executable, str(script)], name)).job_id


def test_two_jobs_compared_on_one_plot(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    first, second = lr_job(local, tmp_path, "lr-a", 10.0), lr_job(local, tmp_path, "lr-b", 30.0)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{first}?plot=loss&with={second}"))
        until(browser, "the interactive plot", loaded)
        lines = browser.execute_script(LINES)
        assert [(label, n) for label, _, _, n in lines] == [(f"{first} worker-0", 20), (f"{second} worker-0", 20)]
        colors = browser.execute_script(
            "return document.getElementById('explore-plot').uplot.series.slice(1).map(s => s._stroke || s.stroke)"
        )
        assert len(set(map(str, colors))) == 2
        legend = hover_step(browser, 4)
        assert legend[f"{first} worker-0"] == "2" and legend[f"{second} worker-0"] == "6", legend
        # Typed in the page: another job added, and one that does not exist is said, the others drawn.
        field = browser.find_element("css selector", "#explore-controls [name=with]")
        field.clear()
        field.send_keys(f"{second}, local/nope\n")
        browser.execute_script("document.querySelector('#explore-controls [name=with]').blur()")
        until(browser, "the missing job said", lambda d: "nope: HTTP 404" in text(d, "#explore-range"))
        assert len(browser.execute_script(LINES)) == 2
        assert "with=" in browser.execute_script("return location.search")


def test_jobs_ticked_in_the_list_are_compared(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    first, second = lr_job(local, tmp_path, "lr-a", 10.0), lr_job(local, tmp_path, "lr-b", 30.0)
    lr_job(local, tmp_path, "lr-c", 50.0)  # not ticked: not compared
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address("/"))
        until(browser, "the jobs table", lambda d: d.find_elements("css selector", "#job-rows input.pick"))
        assert browser.find_element("id", "compare").get_attribute("disabled") is not None
        for job in (first, second):
            browser.find_element("css selector", f"#job-rows input.pick[data-pick='local/{job}']").click()
        assert text(browser, "#picked") == "2 ticked"
        browser.find_element("id", "compare").click()
        until(browser, "the compared plot", loaded)
        assert browser.execute_script("return location.pathname") == f"/jobs/local/{first}"
        lines = browser.execute_script(LINES)
        assert [label for label, _, _, _ in lines] == [f"{first} worker-0", f"{second} worker-0"]


COUNTS = (
    "return document.getElementById('explore-plot').uplot.data.slice(1).map(ys => ys.filter(y => y != null).length)"
)


def test_a_running_jobs_plot_grows_and_keeps_its_zoom(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    job = gated_job(local, tmp_path, gates=3)
    local.resume(job.job_id)
    try:
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job.job_id}?plot=loss"))
            counts = COUNTS
            until(
                browser,
                "the first 5 steps",
                lambda d: d.execute_script(LOADED_SCRIPT) and d.execute_script(counts) == [5, 5],
            )
            job.open_gate(0)
            until(browser, "10 steps, drawn as they came", lambda d: d.execute_script(counts) == [10, 10])
            drag(browser, 0.0, 0.5)
            zoomed = until(
                browser, "zoomed", lambda d: "zoomed" in text(d, "#explore-range") and d.execute_script(RANGE)
            )
            job.open_gate(1)
            until(browser, "15 steps", lambda d: d.execute_script(counts) == [15, 15])
            assert browser.execute_script(RANGE) == zoomed  # the zoom stays while the lines grow
    finally:
        job.open_gate(2)
