"""What the web view's browser tests share: waiting for what the page shows, and reading it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from selenium.webdriver.support.ui import WebDriverWait

WAIT = 60.0
"""Seconds a condition may take before the test fails: a bound for a hung test, not a measured time, so it is
wide enough for a CI machine under load (a page stream's keepalive alone is 15 s)."""


def until(driver: Any, what: str, test: Callable[[Any], Any]) -> Any:
    """The first truthy value of `test(driver)`, waited for (selenium's WebDriverWait), never slept for."""
    return WebDriverWait(driver, WAIT).until(test, message=what)


def text(driver: Any, css: str) -> str:
    """The text of the first element matching `css` ('' if none), read in one script run: the page replaces
    its nodes on every update, so a node found in one call may be gone by the next."""
    return str(
        driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", css)
    )


__all__ = ["WAIT", "text", "until"]
