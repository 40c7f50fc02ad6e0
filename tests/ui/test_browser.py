"""The web view in a real browser (Debian's chromium, headless, driven by selenium): a local 2-replica job's
grid changes phase live, its log lines stream, its metric plot grows, cancel (confirmed) ends it Cancelled,
and a replica's `<script>` line shows as text; then the same page for a job on the Kubernetes API emulator.

Every wait is for something the page shows (selenium's WebDriverWait on a condition), never a sleep."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.cluster import Cluster, emulated  # noqa: F401
from tests.support.helpers import no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import WAIT, text, until
from tests.ui.helpers import TOKEN, XSS, gated_job, release, request


def grid(driver: Any) -> list[tuple[str, str]]:
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#replicas tbody tr')]"
        ".map(r => [r.getAttribute('data-replica'), r.cells[2].innerText])"
    )
    return [(str(a), str(b)) for a, b in rows]


def no_alert(driver: Any) -> bool:
    try:
        driver.switch_to.alert  # noqa: B018 - raises when there is none
    except NoAlertPresentException:
        return True
    return False


def cancel_confirmed(driver: Any) -> None:
    driver.find_element(By.CSS_SELECTOR, 'button[data-action="cancel"]').click()
    alert = WebDriverWait(driver, WAIT).until(expected_conditions.alert_is_present())
    assert alert.text.startswith("cancel job ")
    alert.accept()
    until(driver, "the job shown Cancelled", lambda d: text(d, "#phase") == "Cancelled")


def plot_points(driver: Any) -> list[int]:
    """The points of each line of the loss plot the page shows now (its SVG, fetched again from the address
    the page fetched it from: the image itself shows a blob: address)."""
    src = driver.execute_script(
        "const i = document.querySelector('#metrics img.plot[data-metric=loss]');"
        "return i && i.complete && i.naturalWidth ? new URL(i.dataset.src, location.href).href : null"
    )
    if not src:
        return []
    body = request(src).body
    return sorted(int(n) for n in body.split('data-points="')[1:] for n in [n.split('"', 1)[0]])


def test_local_job_live(browser: Any, tmp_path: Path) -> None:
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=2)
    try:
        with Background([local], token=TOKEN) as bg:
            browser.get(bg.address("/"))
            until(browser, "the job in the table", lambda d: job.job_id in text(d, "#jobs tbody"))
            assert "Suspended" in text(browser, "#jobs tbody") and "generic" in text(browser, "#jobs tbody")
            browser.find_element(By.LINK_TEXT, job.job_id).click()
            until(browser, "the job page", lambda d: text(d, "#phase") == "Suspended")
            assert grid(browser) == [("worker-0", "Pending"), ("worker-1", "Pending")]

            local.resume(job.job_id)  # the grid changes phase live, pushed by the server
            until(
                browser,
                "both replicas Running",
                lambda d: grid(d) == [("worker-0", "Running"), ("worker-1", "Running")],
            )
            assert text(browser, "#phase") == "Running" and text(browser, "#ready") == "2/2"
            until(
                browser,
                "log lines streamed",
                lambda d: "replica 1 step 4" in text(d, "#log") and "replica 0 step 4" in text(d, "#log"),
            )
            until(browser, "a plot of five steps per replica", lambda d: plot_points(d) == [5, 5])

            job.open_gate(0)  # five more steps each: the plot grows, the log goes on
            until(browser, "the plot grown to ten steps", lambda d: plot_points(d) == [10, 10])
            until(browser, "new log lines", lambda d: "replica 0 step 9" in text(d, "#log"))

            log = text(browser, "#log")
            assert f"[worker-0] {XSS}" in log and f"[worker-1] {XSS}" in log  # shown as text
            assert browser.find_elements(By.CSS_SELECTOR, "#log script") == [] and no_alert(browser)

            cancel_confirmed(browser)
            assert local.status(job.job_id).phase is JobPhase.CANCELLED
            until(browser, "the replicas stopped", lambda d: all(p != "Running" for _, p in grid(d)))
            browser.get(bg.address("/"))
            until(browser, "Cancelled in the table", lambda d: "Cancelled" in text(d, "#jobs tbody"))
    finally:
        release(job)
        local.close()


TABS = 8
"""More tabs on a running job than the 6 connections a browser opens to one host across all its tabs."""


def test_eight_tabs_on_a_running_job_all_load_and_stream(browser: Any, tmp_path: Path) -> None:
    """Each job page holds one event stream (status, metrics and log together): eight tabs of one browser on a
    running job all finish loading, and each shows the log line the job prints after they opened."""
    local = LocalBackend()
    job = gated_job(local, tmp_path, gates=2)
    first = browser.current_window_handle
    browser.set_page_load_timeout(WAIT)  # a tab left waiting for a connection fails here, not in 5 minutes
    try:
        local.resume(job.job_id)
        with Background([local], token=TOKEN) as bg:
            href = bg.address(f"/jobs/local/{job.job_id}")
            tabs = []
            for _ in range(TABS):
                browser.switch_to.new_window("tab")
                browser.get(href)  # returns at the page's load event
                tabs.append(browser.current_window_handle)
                until(browser, "the page's log streamed", lambda d: "replica 1 step 4" in text(d, "#log"))
            job.open_gate(0)  # a line printed now reaches every tab over its one open stream
            for tab in tabs:
                browser.switch_to.window(tab)
                until(browser, "the live line in every tab", lambda d: "replica 1 step 9" in text(d, "#log"))
                assert text(browser, "#phase") == "Running"
    finally:
        for handle in browser.window_handles:
            if handle != first:
                browser.switch_to.window(handle)
                browser.close()
        browser.switch_to.window(first)
        release(job)
        if not local.status(job.job_id).phase.is_terminal:
            local.cancel(job.job_id)
        local.close()


def test_kubernetes_job_live(browser: Any, emulated: Cluster) -> None:
    cluster = emulated
    backend = cluster.backend()
    job = cluster.job("web", script="echo hi")
    sub = backend.submit(job, flavor="job")
    with Background([backend], token=TOKEN) as bg:
        browser.get(bg.address(f"/jobs/kubernetes/{sub.name}"))
        until(browser, "the job page", lambda d: text(d, "#phase") in ("Pending", "Running"))
        assert "pytorch" in text(browser, "#framework")
        pods = cluster.start_pods(backend, "job", sub.name)
        for replica, pod in pods.items():
            cluster.kubelet(pod, "Running", XSS, f"hello from {replica}")
        until(browser, "both replicas Running", lambda d: grid(d) == [("worker-0", "Running"), ("worker-1", "Running")])
        until(browser, "log lines streamed", lambda d: "[worker-1] hello from worker-1" in text(d, "#log"))
        assert f"[worker-0] {XSS}" in text(browser, "#log") and no_alert(browser)
        assert cluster.emu is not None
        cluster.emu.append_log(cluster.namespace, pods["worker-0"], "step 2 of worker-0\n")
        until(browser, "a new line", lambda d: "step 2 of worker-0" in text(d, "#log"))
        cancel_confirmed(browser)
        # On a cluster a cancel deletes the job (its pods with it): it leaves the table.
        browser.get(bg.address("/"))
        until(browser, "the table loaded", lambda d: d.find_element(By.ID, "live").get_attribute("class") == "live on")
        until(browser, "the job gone from the table", lambda d: sub.name not in text(d, "#jobs"))
