"""The web view's key stays with its page: cookies are not separated by port (RFC 6265), so a browser sends
a cookie of 127.0.0.1 to every server on 127.0.0.1. Nothing the browser sends by itself may open the web
view: the page's script holds the token (from the address's fragment, then the origin's storage) and sends
it in a header, which a browser sends to no other server.

In a real browser (Debian's chromium, headless, driven by selenium) and over plain HTTP. Every wait is for
something the page shows, never a sleep."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.server import Background
from tests.support.helpers import no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.browsing import text, until
from tests.ui.helpers import TOKEN, XSS, gated_job, release, request


class Recorder(http.server.BaseHTTPRequestHandler):
    """A plain page on another local port that keeps the headers of every request it gets."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:  # http.server's name for a GET's handler
        Recorder.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"<!doctype html><title>another app</title><p id=here>another app on this machine</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_app() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another program's web server on 127.0.0.1 (a notebook, a dev server, another user's page): its
    address, and the headers of each request it got."""
    Recorder.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", Recorder.seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def live(driver: Any) -> bool:
    return bool(driver.find_element("id", "live").get_attribute("class") == "live on")


def test_another_local_port_gets_no_credential_from_the_browser(
    browser: Any, server: Background, local: LocalBackend, tmp_path: Path, other_app: tuple[str, list[dict[str, str]]]
) -> None:
    """After the page was opened with its token (and has acted through it), the same browser loads a page of
    another server on 127.0.0.1: that server gets no cookie at all, nothing that holds the token, and none of
    what it got opens the web view's data."""
    job = gated_job(local, tmp_path, gates=1)
    try:
        browser.get(server.address("/"))
        until(browser, "the job in the table", lambda d: job.job_id in text(d, "#jobs tbody") and live(d))
        browser.get(server.address(f"/jobs/local/{job.job_id}"))
        until(browser, "the job page live", lambda d: text(d, "#phase") == "Suspended" and live(d))
        url, seen = other_app
        browser.get(url + "/")
        until(browser, "the other app's page", lambda d: "another app" in text(d, "#here"))
    finally:
        release(job)
    assert seen, "the other app got no request"
    for headers in seen:
        assert "cookie" not in headers, headers
        assert not any(TOKEN in value for value in headers.values()), headers
        # Replayed to the web view as they came (Host aside, which must name the web view's own address).
        replay = {k: v for k, v in headers.items() if k not in ("host", "connection")}
        assert request(server.url + "/api/jobs", headers=replay, auth=False).status == 401


def test_the_token_leaves_the_address_and_the_page_works_from_it(
    browser: Any, server: Background, local: LocalBackend, tmp_path: Path
) -> None:
    """The printed address carries the token after `#` (never sent to a server): the page takes it, removes it
    from the address bar, and keeps working with it after a reload and on the pages it links to."""
    job = gated_job(local, tmp_path, gates=1)
    try:
        address = server.address("/")
        assert address == f"{server.url}/#token={TOKEN}"
        browser.get(address)
        until(browser, "the job in the table", lambda d: job.job_id in text(d, "#jobs tbody") and live(d))
        assert browser.current_url == server.url + "/"
        assert browser.execute_script("return history.length") >= 1
        browser.refresh()  # no token in the address now: the page's own storage holds it
        until(browser, "the table after a reload", lambda d: job.job_id in text(d, "#jobs tbody") and live(d))
        browser.find_element("link text", job.job_id).click()
        until(browser, "the job page", lambda d: text(d, "#phase") == "Suspended" and live(d))
        assert "token" not in browser.current_url
    finally:
        release(job)


def test_a_page_opened_without_its_token_says_how_to_get_in(browser: Any, local: LocalBackend) -> None:
    """A fresh server on a port this browser has never seen: the page shows no data and says what to open."""
    with Background([local]) as bg:
        browser.get(bg.url + "/")
        until(browser, "the way in said", lambda d: "open the address kubetrain ui printed" in text(d, "#notice"))
        assert text(browser, "#jobs") == ""


def test_pages_without_the_token_hold_no_job_data(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    """The page addresses answer without the token (the browser cannot send a header when it opens an
    address), with the layout and the script only: the job's data comes from requests that need it."""
    job = gated_job(local, tmp_path, gates=1, name="secret-name")
    try:
        pages = [request(server.url + path, auth=False) for path in ("/", f"/jobs/local/{job.job_id}")]
        assert [p.status for p in pages] == [200, 200]
        assert pages[0].body == pages[1].body  # one layout for every page: nothing of the job in it
        assert "secret-name" not in pages[0].body and XSS not in pages[0].body
        for path in ("/content", f"/jobs/local/{job.job_id}/content", f"/jobs/local/{job.job_id}/detail.json"):
            assert request(server.url + path, auth=False).status == 401, path
        content = request(f"{server.url}/jobs/local/{job.job_id}/content")
        assert content.status == 200 and job.job_id in content.body
    finally:
        release(job)


def test_no_cookie_is_set_or_taken(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    job = gated_job(local, tmp_path, gates=1)
    try:
        href = f"{server.url}/jobs/local/{job.job_id}"
        replies = [
            request(server.url + "/", auth=False),
            request(server.url + "/content"),
            request(href + "/content"),
            request(href + "/detail.json"),
            request(server.url + "/api/jobs"),
            request(server.url + f"/?token={TOKEN}", auth=False),
        ]
        assert [r.status for r in replies] == [200] * 6
        assert all("set-cookie" not in r.headers for r in replies)
        # The cookies the web view used to set open nothing.
        cookie = f"kubetrain_token_{server.port}={TOKEN}; kubetrain_session_{server.port}=x"
        assert request(server.url + "/api/jobs", headers={"Cookie": cookie}, auth=False).status == 401
        assert request(href + "/suspend", "POST", {"Cookie": cookie}, auth=False).status == 401
    finally:
        release(job)
