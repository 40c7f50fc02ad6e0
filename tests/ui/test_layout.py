"""The pages as people with other screens and other means meet them, in a real browser (Debian's chromium,
headless, driven by selenium): nothing overflows sideways on a 390 px phone (the jobs table, the plots, the
header, the log's filters), and axe-core (the accessibility engine, from the npm registry; loaded into the page
by the test only, never shipped) finds no violation on the jobs table nor on a failed, a cancelled and a
running job's page.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, gated_job, release

AXE = Path(__file__).resolve().parents[2] / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core as scripts/test.sh installs it (npm); never part of the package."""
PHONE = 390


@dataclass
class Scene:
    failed: str
    cancelled: str
    running: str


FAIL = "import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\nprint('ValueError: bad lr', file=sys.stderr)\nsys.exit(3)\n"  # noqa: E501


@pytest.fixture
def scene(local: LocalBackend, tmp_path: Path) -> Iterator[Scene]:
    """200 jobs in the store, a failed one, a cancelled one and a running one with metrics."""
    spec = json.dumps({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"},
                       "spec": {"framework": "pytorch", "replicas": 2}})  # fmt: skip
    for n in range(200):
        name = f"recorded-job-with-a-long-name-{n}"
        local.store.create_job(name, "local", spec, None, [("worker", 0), ("worker", 1)])
    (tmp_path / "fail.py").write_text(FAIL)
    failed = local.run(exec_job([sys.executable, str(tmp_path / "fail.py")], "bad-lr")).job_id
    (tmp_path / "c").mkdir()
    cancelled = gated_job(local, tmp_path / "c", gates=1, name="stopped")
    local.cancel(cancelled.job_id)
    (tmp_path / "r").mkdir()
    running = gated_job(local, tmp_path / "r", gates=1, name="resnet-ddp-with-a-rather-long-name")
    local.resume(running.job_id)
    try:
        yield Scene(failed, cancelled.job_id, running.job_id)
    finally:
        release(cancelled)
        release(running)


def phone(driver: Any) -> None:
    """The viewport of a 390 px wide phone (as chromium's device emulation sets it)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": PHONE, "height": 844, "deviceScaleFactor": 1, "mobile": True}
    )


def desktop(driver: Any) -> None:
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


# What sticks out past the right edge of the viewport (the page's own width, and each element's box; inside a
# box that scrolls by itself, such as the log, content may be wider: it scrolls there, not the page).
OVERFLOW = """
const width = document.documentElement.clientWidth;
const out = [];
for (const e of document.querySelectorAll('body *')) {
  if (e.closest('.log') && !e.classList.contains('log')) continue;
  const r = e.getBoundingClientRect();
  const what = e.id ? '#' + e.id : e.tagName.toLowerCase() + '.' + e.className;
  if (r.width > 0 && r.right > width + 0.5) out.push(what + ' ' + Math.round(r.right));
}
return {page: document.documentElement.scrollWidth, width: width, out: out.slice(0, 10)};
"""


def loaded(driver: Any, css: str) -> bool:
    return bool(driver.execute_script("return !!document.querySelector(arguments[0])", css))


def test_nothing_overflows_on_a_390px_phone(browser: Any, local: LocalBackend, scene: Scene) -> None:
    with Background([local], token=TOKEN) as bg:
        try:
            phone(browser)
            browser.get(bg.address("/"))
            until(browser, "the jobs table", lambda d: loaded(d, "#job-rows tr"))
            got = browser.execute_script(OVERFLOW)
            assert got["page"] <= PHONE and got["out"] == [], got
            # A phone's browser zooms out a page wider than its screen (its layout viewport grows): not here.
            assert browser.execute_script("return window.innerWidth") == PHONE
            # 203 jobs, one page of 50: not a page as long as all of them.
            assert browser.execute_script("return document.querySelectorAll('#job-rows tr').length") == 50
            assert "jobs 1–50 of 203" in text(browser, "#jobs-summary")

            for job in (scene.failed, scene.running):
                browser.get(bg.url + f"/jobs/local/{job}")
                until(browser, "the page with its log", lambda d: loaded(d, "#log .ln"))
                got = browser.execute_script(OVERFLOW)
                assert got["page"] <= PHONE and got["out"] == [], (job, got)
        finally:
            desktop(browser)


AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ['violations']}).then(
  r => done(r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html).slice(0, 3)}))),
  e => done([{id: 'axe failed', nodes: [String(e)]}]));
"""


def violations(driver: Any) -> list[dict[str, Any]]:
    assert AXE.exists(), f"axe-core is not installed: {AXE} (scripts/test.sh installs it with npm)"
    # Put in the page through the DevTools protocol (as a test's tool, past the page's CSP): never served.
    driver.execute_script(AXE.read_text())
    driver.set_script_timeout(60)
    return list(driver.execute_async_script(AXE_RUN))


def test_axe_core_finds_no_violation(browser: Any, local: LocalBackend, scene: Scene) -> None:
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address("/"))
        until(browser, "the jobs table", lambda d: loaded(d, "#job-rows tr"))
        until(browser, "live", lambda d: d.find_element("id", "live").get_attribute("class") == "live on")
        assert violations(browser) == []
        pages = ((scene.failed, "end of output"), (scene.cancelled, "end of output"), (scene.running, "step 4"))
        for job, shown in pages:
            browser.get(bg.url + f"/jobs/local/{job}")
            until(browser, f"the page showing {shown!r}", lambda d: shown in text(d, "#log"))  # noqa: B023
            assert violations(browser) == [], job
