"""What the web view's benchmark measures inside a browser: Debian's headless chromium driven by selenium
(as tests/ui/test_browser.py drives it), with a recorder put in every page before the page's own script.

The recorder is a MutationObserver on the whole document. On every change it notes, once, the wall-clock
time (`performance.timeOrigin + performance.now()`, the machine's clock as Python's `time.time()` reads it)
at which the page first showed something: its content (fetched with the token into the layout), a replica's
grid cell with a phase, the log count reaching a number, the log's end marker, a live update of the jobs
table. Times are taken in the page, when the DOM
changed, so how often selenium looks does not change them; selenium waits for a mark with an async
script that the recorder answers when the mark is set (no polling, no sleeps).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# Installed with the DevTools protocol's Page.addScriptToEvaluateOnNewDocument: it runs in every page
# before the page's own scripts, so marks set while the HTML is still parsing are caught too.
RECORDER = r"""
(function () {
  var marks = {}, waiting = {}, loaded = false;
  function now() { return performance.timeOrigin + performance.now(); }
  function mark(name) {
    if (name in marks) return;
    marks[name] = now();
    (waiting[name] || []).forEach(function (cb) { cb(marks[name]); });
    delete waiting[name];
  }
  function look(records) {
    document.querySelectorAll("#replicas tbody tr").forEach(function (tr) {
      if (tr.cells.length > 2) mark("replica " + tr.getAttribute("data-replica") + " " + tr.cells[2].textContent);
    });
    if (document.querySelector("#view > .view")) mark("content");
    var count = document.getElementById("log-count");
    if (count && count.textContent) mark("log " + count.textContent);
    if (document.querySelector("#log .log-end")) mark("log end");
    var jobs = document.querySelector("#jobs tbody");
    if (jobs) {
      mark("jobs rows " + jobs.childElementCount);
      // The server-rendered rows come with the HTML; a change after DOMContentLoaded is the first
      // rendering of the live stream's "jobs" event (which rewrites the count even when no row changed).
      var count = document.getElementById("count");
      if (loaded && records && records.some(function (r) { return r.target === jobs || r.target === count; })) {
        mark("jobs live");
      }
    }
  }
  document.addEventListener("DOMContentLoaded", function () { loaded = true; });
  new MutationObserver(look).observe(document, { childList: true, subtree: true, characterData: true });
  window.__kubetrainBench = {
    marks: marks,
    // For selenium's execute_async_script: calls back with the mark's time once it is set.
    wait: function (name, cb) {
      look(null);
      if (name in marks) cb(marks[name]); else (waiting[name] = waiting[name] || []).push(cb);
    },
  };
})();
"""


def available() -> str | None:
    """None when the browser measurements can run here, else what is missing."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    return f"missing: {', '.join(missing)}" if missing else None


@contextmanager
def chromium() -> Iterator[Browser]:
    from tests.support.browser import headless_chromium

    with headless_chromium() as driver:
        driver.set_script_timeout(60)  # bounds for a hung wait, not measured times
        driver.set_page_load_timeout(60)
        browser = Browser(driver)
        browser.install_recorder()
        yield browser


@dataclass
class Navigation:
    """A page load, in ms from the start of the navigation (the Navigation Timing entry of the page)."""

    response_end: float
    dom_content_loaded: float
    load: float


class Browser:
    def __init__(self, driver: Any) -> None:
        self.driver = driver

    def install_recorder(self) -> None:
        """Into every page opened from now on, in every tab (a new tab is set up by `new_tab`)."""
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})

    def open(self, url: str) -> float:
        """Load `url` in the current tab; the wall-clock time the navigation started (`performance.timeOrigin`)."""
        self.driver.get(url)
        return float(self.driver.execute_script("return performance.timeOrigin")) / 1000

    def new_tab(self, url: str) -> None:
        self.driver.switch_to.new_window("tab")
        self.install_recorder()
        self.driver.get(url)

    def wait_mark(self, name: str) -> float:
        """The wall-clock time (s, as time.time()) at which the page first showed `name`; waits for it."""
        script = "window.__kubetrainBench.wait(arguments[0], arguments[arguments.length - 1])"
        return float(self.driver.execute_async_script(script, name)) / 1000

    def navigation(self) -> Navigation:
        """Once the load event has ended (selenium's get returns at the load event; its end may be a tick later)."""
        entry = self.driver.execute_async_script(
            """var done = arguments[arguments.length - 1];
            (function check() {
              var e = performance.getEntriesByType("navigation")[0];
              if (e && e.loadEventEnd > 0) done([e.responseEnd, e.domContentLoadedEventEnd, e.loadEventEnd]);
              else setTimeout(check, 10);
            })();"""
        )
        return Navigation(*(float(v) for v in entry))

    def clock_offset(self, samples: int = 5) -> tuple[float, float]:
        """The page's clock minus Python's and its uncertainty (half the script's round trip), in ms, from the
        sample of the shortest round trip: both read the machine's wall clock, so this checks the latency
        numbers' premise rather than correcting them."""
        best: tuple[float, float] | None = None
        for _ in range(samples):
            before = time.time()
            page = float(self.driver.execute_script("return performance.timeOrigin + performance.now()")) / 1000
            after = time.time()
            sample = ((page - (before + after) / 2) * 1000, (after - before) * 500)
            if best is None or sample[1] < best[1]:
                best = sample
        assert best is not None
        return best
