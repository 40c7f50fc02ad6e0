"""One renderer: the server's templates render every piece of the pages, on the first load and in the live
updates, so a piece looks the same whichever way it came; and whatever a job holds (its env, its output, its
metric names, a failure's last lines, a search typed in the address) is text on the page, never markup.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import make_job, no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, Events, gated_job, release, request


def piece(html: str, element_id: str) -> str:
    """The inner HTML of the element with `element_id` in a page's content (a tbody, a ul, a div)."""
    m = re.search(rf'<(\w+) id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert m is not None, element_id
    return m.group(2).strip()


def test_a_row_and_a_status_look_the_same_first_loaded_and_streamed(
    server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    job = gated_job(local, tmp_path, gates=1)
    try:
        local.resume(job.job_id)
        href = f"{server.url}/jobs/local/{job.job_id}"
        with Events(href + "/events") as events:
            # The supervisor records the replicas Running, then the job: wait for both.
            status = events.until(
                "status",
                lambda d: d["row"]["phase"] == "Running" and all(r["phase"] == "Running" for r in d["replicas"]),
            )
        page = request(href + "/content").body
        for element in ("replica-rows", "pending", "failure", "condition-rows"):
            assert piece(page, element) == status["html"][element], element
        assert 'id="phase" class="phase phase-Running"' in status["html"]["job-head"]

        table = request(server.url + "/content").body
        with Events(server.url + "/events") as events:  # no digest: every row is sent, rendered
            first = events.until("jobs")
        key = f"local/{job.job_id}"
        [row] = re.findall(rf'<tr data-key="{key}">.*?</tr>', table, re.S)
        assert first["html"][key] == row
    finally:
        release(job)


HOSTILE = '</pre><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'

# Prints markup on both streams, logs a metric named with markup, and fails with markup in its last lines.
SCRIPT = f"""
import sys
import kubetrain.metrics as m
print({HOSTILE!r}, flush=True)
print("err " + {HOSTILE!r}, file=sys.stderr, flush=True)
m.log(step=0, **{{'"><img src=x onerror="window.__xss=3">': 1.0}})
sys.exit(3)
"""

INJECTED = """
return {
  xss: window.__xss === undefined ? null : window.__xss,
  imgs: [...document.querySelectorAll('#view img')].filter(i => !i.classList.contains('plot')).length,
  scripts: [...document.scripts].map(s => new URL(s.src || 'inline:', location.href).pathname),
}
"""


def test_markup_from_a_job_is_text_on_its_page_and_in_the_table(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(SCRIPT)
    run = {"exec": [sys.executable, str(script)]}
    job = make_job({"framework": "generic", "replicas": 1, "run": run, "env": {"NOTE": HOSTILE}}, "hostile")
    result = local.run(job)
    assert result.status is not None and result.status.phase is JobPhase.FAILED
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{result.job_id}"))
        until(browser, "the end of the output", lambda d: "end of output" in text(d, "#log"))
        until(browser, "the metric's plot", lambda d: d.execute_script("return !!document.querySelector('img.plot')"))
        assert HOSTILE in text(browser, "#log") and f"err {HOSTILE}" in text(browser, "#log")
        assert HOSTILE in text(browser, "#failure")  # the failure's last lines
        spec = browser.execute_script("return document.getElementById('spec').textContent")
        assert json.dumps(HOSTILE) in spec  # the spec as JSON: its quotes escaped, its markup text
        ours = ["/static/uplot.iife.min.js", "/static/ui.js"]  # the layout's scripts only, both shipped
        assert browser.execute_script(INJECTED) == {"xss": None, "imgs": 0, "scripts": ours}
        # The metric's interactive plot names it as text.
        click = "const i = document.querySelector('#metrics img.plot'); if (i) i.click(); return !!i;"
        until(browser, "the metric's picture clicked", lambda d: d.execute_script(click))
        until(browser, "the interactive plot", lambda d: d.execute_script("return !!document.querySelector('.u-over')"))
        assert text(browser, "#explore-title") == '"><img src=x onerror="window.__xss=3">'
        assert browser.execute_script(INJECTED) == {"xss": None, "imgs": 0, "scripts": ours}

        # A search typed in the address is the search box's text, not markup.
        browser.get(bg.url + "/?q=" + quote('"><img src=x onerror="window.__xss=4">'))
        until(browser, "the table", lambda d: d.execute_script("return !!document.getElementById('job-filters')"))
        value = browser.execute_script("return document.getElementById('job-filters').elements.q.value")
        assert value == '"><img src=x onerror="window.__xss=4">'
        assert browser.execute_script(INJECTED) == {"xss": None, "imgs": 0, "scripts": ours}
