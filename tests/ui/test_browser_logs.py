"""The job page's log in a real browser (Debian's chromium, headless, driven by selenium): after a switch to
another tab and back it keeps its place and is not sent again (the stream resumes after its last line); its
scroll height is its lines' for a live job; each line links to itself (the address opens the page there);
timestamps on demand, stderr marked, the grep's hits highlighted, all kept in the address.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import exec_job, no_process_left_behind, wait_phase  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN

BATCH = 3000

# Prints BATCH numbered lines after each of its gates (a FIFO: opening it blocks until the test opens it).
GATED = """
import sys
for g, gate in enumerate(sys.argv[1:]):
    open(gate).read()
    for i in range(g * {batch}, (g + 1) * {batch}):
        print(f"line {{i}}")
    sys.stdout.flush()
"""

# The log box as the reader sees it: its scroll position and height, the number and text of the first line
# in view, the count, whether it follows, whether the output ended.
VIEW = """
const box = document.getElementById('log');
if (!box || !document.getElementById('log-count').textContent) return null;
const top = box.getBoundingClientRect().top + box.clientTop;
const rows = [...box.querySelectorAll('.ln')];
const first = rows.find(r => r.getBoundingClientRect().bottom > top + 1);
return {
  top: box.scrollTop, height: box.scrollHeight, client: box.clientHeight,
  first: first ? [first.querySelector('a.n').textContent, first.querySelector('.t').textContent] : null,
  count: document.getElementById('log-count').textContent,
  follow: document.getElementById('log-follow').checked,
  ended: !!box.querySelector('.log-end'),
  lineHeight: rows.length ? rows[0].offsetHeight : 0,
};
"""

# What the page does while the test switches tabs: when it is hidden and shown, and what it asks the server.
WATCH = """
window.__seen = [];
document.addEventListener('visibilitychange', () => window.__seen.push(document.visibilityState));
window.__asked = [];
const fetched = window.fetch;
window.fetch = function (url) { window.__asked.push(String(url)); return fetched.apply(this, arguments); };
"""


def view(driver: Any) -> dict[str, Any] | None:
    found = driver.execute_script(VIEW)
    return dict(found) if found else None


def gates(tmp: Path, n: int) -> list[Path]:
    paths = [tmp / f"gate{i}" for i in range(n)]
    for p in paths:
        os.mkfifo(p)
    return paths


def open_gate(gate: Path) -> None:
    os.close(os.open(gate, os.O_WRONLY))  # returns once the replica waits there


def test_the_log_keeps_its_place_after_a_tab_switch_and_is_not_sent_again(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    script = tmp_path / "gated.py"
    script.write_text(GATED.format(batch=BATCH))
    fifo = gates(tmp_path, 2)
    job_id = local.run(exec_job([sys.executable, str(script), *map(str, fifo)], "gated"), detach=True).job_id
    first = browser.current_window_handle
    try:
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address(f"/jobs/local/{job_id}"))
            until(browser, "the page", lambda d: view(d) is not None or d.find_elements(By.ID, "log"))
            open_gate(fifo[0])
            until(browser, "the first lines", lambda d: (v := view(d)) is not None and v["count"] == f"{BATCH} lines")
            shown = view(browser)
            assert shown is not None and shown["follow"]
            # A live log is as tall as its lines (not a placeholder's guess per block of lines).
            assert BATCH * shown["lineHeight"] <= shown["height"] <= BATCH * shown["lineHeight"] + shown["client"]

            until(browser, "the last line in view", lambda d: (v := view(d)) is not None and v["top"] > 0)
            box = browser.find_element(By.ID, "log")
            ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(box), 0, -20000).perform()
            # The wheel pauses following at once; the box then scrolls at the browser's pace to the middle.
            until(browser, "following paused, the box scrolled up to the middle",
                  lambda d: (v := view(d)) is not None and not v["follow"] and v["first"] is not None
                  and int(v["first"][0]) < BATCH - 500)
            before = view(browser)
            assert before is not None and before["first"] is not None

            browser.execute_script(WATCH)
            browser.switch_to.new_window("tab")  # the job page's tab is hidden: it lets its stream go
            browser.get("about:blank")
            open_gate(fifo[1])  # more lines while it is hidden
            wait_phase(job_id, JobPhase.SUCCEEDED)
            browser.close()
            browser.switch_to.window(first)

            until(browser, "the rest of the lines", lambda d: view(d)["count"] == f"{2 * BATCH} lines")  # type: ignore[index]
            until(browser, "the end of the output", lambda d: view(d)["ended"])  # type: ignore[index]
            assert browser.execute_script("return window.__seen") == ["hidden", "visible"]
            after = view(browser)
            assert after is not None
            assert (after["top"], after["first"]) == (before["top"], before["first"])  # the same place
            assert not after["follow"]
            # The stream opened again asked for the lines after the last one received, and got only those.
            [resumed] = [parse_qs(urlsplit(u).query) for u in browser.execute_script("return window.__asked")]
            assert list(resumed) == ["after"] and '"worker-0":' in resumed["after"][0], resumed
            browser.find_element(By.ID, "log-follow").click()  # to the end: the last line is the job's last
            until(browser, "the last line", lambda d: f"line {2 * BATCH - 1}" in text(d, "#log"))
            numbered = browser.execute_script(
                "return [...document.querySelectorAll('#log .ln')].slice(-2).map(r => r.innerText)"
            )
            last = 2 * BATCH
            assert numbered == [f"{last - 1}[worker-0] line {last - 2}", f"{last}[worker-0] line {last - 1}"]
    finally:
        for handle in browser.window_handles:
            if handle != first:
                browser.switch_to.window(handle)
                browser.close()
        browser.switch_to.window(first)
        for gate in fifo:
            with contextlib.suppress(OSError):
                os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))


LINES = 5000
PRINT = f"import sys\nsys.stdout.write(''.join(f'line {{i}}\\n' for i in range({LINES})))\n"

SELECTED = """
const sel = document.querySelector('#log .ln.sel');
if (!sel) return null;
const b = document.getElementById('log').getBoundingClientRect(), r = sel.getBoundingClientRect();
return {n: sel.querySelector('a.n').textContent, text: sel.querySelector('.t').textContent,
        inView: r.top >= b.top && r.bottom <= b.bottom, follow: document.getElementById('log-follow').checked};
"""


def test_a_link_to_a_line_opens_the_page_on_that_line(browser: Any, local: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "print.py").write_text(PRINT)
    job_id = local.run(exec_job([sys.executable, str(tmp_path / "print.py")], "printer")).job_id
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job_id}"))  # the page keeps the token; the address drops it
        until(browser, "the log", lambda d: (v := view(d)) is not None and v["ended"])
        browser.get("about:blank")
        browser.get(bg.url + f"/jobs/local/{job_id}#L4321")  # a page opened on that address
        until(browser, "line 4321 marked", lambda d: d.execute_script(SELECTED) is not None)
        assert browser.execute_script(SELECTED) == {"n": "4321", "text": "line 4320", "inView": True, "follow": False}

        # A line's number is its link: the address names it, and a reload opens there again.
        until(browser, "the end", lambda d: (v := view(d)) is not None and v["ended"])
        # Found and clicked in one go: the rows in view are drawn anew as the box scrolls.
        number = browser.execute_script(
            "const a = document.querySelector('#log .ln:not(.sel) a.n'); a.click(); return a.textContent"
        )
        until(browser, "the address naming it", lambda d: urlsplit(d.current_url).fragment == f"L{number}")
        browser.refresh()
        until(browser, "the line after a reload", lambda d: (s := d.execute_script(SELECTED)) and s["n"] == number)

        # A link to a line past the end, followed on the same page once its log has ended: no line will come,
        # so it is said at once, not a blank box.
        until(browser, "the end after the reload", lambda d: (v := view(d)) is not None and v["ended"])
        browser.execute_script(f"window.location.hash = '#L{LINES + 7}'")
        until(browser, "the line said missing", lambda d: "is not in this log" in text(d, "#log-error"))
        said = f"line {LINES + 7} is not in this log (it has {LINES} lines with these filters)"
        assert text(browser, "#log-error") == said
        # The same, in a page opened on that address: the line is awaited, then said missing at its end.
        browser.get("about:blank")
        browser.get(bg.url + f"/jobs/local/{job_id}#L{LINES + 7}")
        until(browser, "the line said missing", lambda d: "is not in this log" in text(d, "#log-error"))
        said = f"line {LINES + 7} is not in this log (it has {LINES} lines with these filters)"
        assert text(browser, "#log-error") == said


BOTH = """
import sys
for i in range(6):
    print(f"step {i} loss 0.{i}", flush=True)
    if i % 2:
        print(f"warning: step {i} is slow", file=sys.stderr, flush=True)
"""

LINE_PARTS = """
return [...document.querySelectorAll('#log .ln')].map(r => ({
  text: r.querySelector('.t').textContent, err: r.classList.contains('err'),
  marks: [...r.querySelectorAll('mark')].map(m => m.textContent),
  stamp: r.querySelector('.ts') ? r.querySelector('.ts').textContent : null,
}));
"""


def test_timestamps_stderr_and_the_greps_hits_are_shown_and_kept_in_the_address(
    browser: Any, local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "both.py").write_text(BOTH)
    job_id = local.run(exec_job([sys.executable, str(tmp_path / "both.py")], "both")).job_id
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/local/{job_id}"))
        until(browser, "the log", lambda d: (v := view(d)) is not None and v["ended"] and v["count"] == "9 lines")
        parts = browser.execute_script(LINE_PARTS)
        assert [p["err"] for p in parts if p["text"].startswith("warning")] == [True, True, True]
        assert not any(p["err"] for p in parts if p["text"].startswith("step"))
        assert all(p["stamp"] is None for p in parts)

        browser.find_element(By.ID, "log-ts").click()
        until(browser, "timestamps", lambda d: all(p["stamp"] for p in d.execute_script(LINE_PARTS)))
        stamp = browser.execute_script(LINE_PARTS)[0]["stamp"]
        assert len(stamp) == 12 and stamp[2] == stamp[5] == ":" and stamp[8] == "."  # HH:MM:SS.mmm
        # When the line was written, in the reader's time zone (the browser's is the machine's here): while
        # the job ran.
        ran = local.status(job_id)
        assert ran.started_at is not None and ran.finished_at is not None
        started, ended = (time.strftime("%H:%M:%S", time.localtime(t)) for t in (ran.started_at - 1, ran.finished_at + 1))  # noqa: E501
        assert started <= stamp[:8] <= ended or ended < started, (started, stamp, ended)  # (or it ran over midnight)
        assert parse_qs(urlsplit(browser.current_url).query) == {"ts": ["1"]}

        grep = browser.find_element(By.NAME, "grep")
        grep.send_keys(r"step \d+ (is|loss)")
        grep.submit()
        until(browser, "the grep's lines", lambda d: (v := view(d)) is not None and v["ended"])
        assert view(browser)["count"] == "9 lines"  # type: ignore[index]
        # (stdout and stderr are read apart: their lines merge by time, in either order within a step)
        marks = sorted(p["marks"] for p in browser.execute_script(LINE_PARTS))
        assert marks == [["step 0 loss"], ["step 1 is"], ["step 1 loss"], ["step 2 loss"], ["step 3 is"],
                         ["step 3 loss"], ["step 4 loss"], ["step 5 is"], ["step 5 loss"]]  # fmt: skip
        assert parse_qs(urlsplit(browser.current_url).query) == {"ts": ["1"], "grep": [r"step \d+ (is|loss)"]}

        browser.refresh()  # the filters and the timestamps are the address's: a reload shows the same
        until(browser, "the same log", lambda d: (v := view(d)) is not None and v["ended"])
        assert sorted(p["marks"] for p in browser.execute_script(LINE_PARTS)) == marks
        assert all(p["stamp"] for p in browser.execute_script(LINE_PARTS))
        assert browser.find_element(By.NAME, "grep").get_attribute("value") == r"step \d+ (is|loss)"
