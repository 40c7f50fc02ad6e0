"""The jobs table for hundreds of jobs in a real browser (Debian's chromium, headless, driven by selenium):
headings sort, the phase filter and the name search narrow it, it comes in pages, and all of it is in the
address, so a reload (or a link) shows the same table; the live updates keep to what the table shows.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import until
from tests.ui.helpers import TOKEN

SPEC = json.dumps({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"},
                   "spec": {"framework": "pytorch", "replicas": 1}})  # fmt: skip

TABLE = """
const rows = document.querySelectorAll('#job-rows tr');
return {
  ids: [...rows].map(r => r.querySelector('td.name').innerText),
  phases: [...rows].map(r => r.cells[1].innerText),
  sorted: [...document.querySelectorAll('#jobs th[aria-sort]')]
    .map(t => [t.innerText.trim(), t.getAttribute('aria-sort')]),
  phase: document.getElementById('job-filters').elements.phase.value,
  q: document.getElementById('job-filters').elements.q.value,
  summary: document.getElementById('jobs-summary').innerText,
};
"""


def table(driver: Any) -> dict[str, Any]:
    return dict(driver.execute_script(TABLE))


def query(driver: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(driver.current_url).query)


def record(local: LocalBackend, name: str, phase: JobPhase) -> str:
    """A job recorded in the store (as `run` records it), not started."""
    return local.store.create_job(name, "local", SPEC, None, [("worker", 0)], phase=phase)


def shown(driver: Any) -> bool:
    return bool(driver.execute_script("return !!document.querySelector('#job-rows')"))


def test_sort_filter_search_and_page_are_in_the_address_and_survive_a_reload(
    browser: Any, local: LocalBackend
) -> None:
    for n in range(120):
        phase = JobPhase.FAILED if n % 3 == 0 else JobPhase.SUCCEEDED
        record(local, f"{'bert' if n % 2 else 'resnet'}-{n:03d}", phase)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address("/"))
        until(browser, "the first page", lambda d: shown(d) and len(table(d)["ids"]) == 50)
        assert "jobs 1–50 of 120" in table(browser)["summary"]

        browser.find_element(By.CSS_SELECTOR, "#jobs th a[href*='sort=name']").click()
        until(browser, "sorted by name", lambda d: query(d).get("sort") == ["name"] and table(d)["sorted"])
        until(browser, "the rows by name", lambda d: table(d)["ids"] == sorted(table(d)["ids"]))
        assert table(browser)["sorted"] == [["NAME▲", "ascending"]]

        Select(browser.find_element(By.NAME, "phase")).select_by_value("Failed")
        until(browser, "Failed only", lambda d: query(d).get("phase") == ["Failed"])
        until(browser, "Failed rows", lambda d: set(table(d)["phases"]) == {"Failed"})
        browser.find_element(By.NAME, "q").send_keys("bert")
        until(browser, "the search in the address", lambda d: query(d).get("q") == ["bert"])
        until(browser, "bert's failed jobs", lambda d: len(table(d)["ids"]) == 20)
        wanted = sorted(f"bert-{n:03d}" for n in range(120) if n % 2 and n % 3 == 0)
        assert [i.rsplit("-", 1)[0] for i in table(browser)["ids"]] == wanted  # each id: its name and 5 letters
        assert "jobs 1–20 of 20 (filtered from 120)" in table(browser)["summary"]

        before = table(browser)
        browser.refresh()
        until(browser, "the same table after a reload", lambda d: shown(d) and table(d) == before)
        assert query(browser) == {"sort": ["name"], "dir": ["asc"], "phase": ["Failed"], "q": ["bert"]}

        # The live stream keeps to the table's filters: a matching job comes in, another does not.
        record(local, "bert-new", JobPhase.FAILED)
        record(local, "bert-suspended", JobPhase.SUSPENDED)
        until(browser, "both jobs counted", lambda d: "of 21 (filtered from 122)" in table(d)["summary"])
        assert any(i.startswith("bert-new-") for i in table(browser)["ids"])
        assert not any(i.startswith("bert-suspended") for i in table(browser)["ids"])


def test_pages_move_with_the_address_and_the_back_button(browser: Any, local: LocalBackend) -> None:
    for n in range(60):
        record(local, f"job-{n:03d}", JobPhase.SUCCEEDED)
    with Background([local], token=TOKEN) as bg:
        browser.get(bg.address("/?per=25"))
        until(browser, "the first page", lambda d: shown(d) and "jobs 1–25 of 60" in table(d)["summary"])
        first = table(browser)["ids"]
        browser.find_element(By.CSS_SELECTOR, "nav.pager a[rel=next]").click()
        until(browser, "the second page", lambda d: "jobs 26–50 of 60" in table(d)["summary"])
        assert query(browser) == {"per": ["25"], "page": ["2"]}
        second = table(browser)["ids"]
        assert not set(first) & set(second) and len(second) == 25
        browser.refresh()
        until(browser, "the second page after a reload", lambda d: shown(d) and table(d)["ids"] == second)
        browser.back()
        until(browser, "the first page again", lambda d: table(d)["ids"] == first)
        assert query(browser) == {"per": ["25"]}
