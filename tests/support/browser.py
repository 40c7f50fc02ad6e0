"""Debian's chromium, headless, driven by selenium: one way to start it for the browser tests, the web view's
benchmark and its screenshots (scripts/test.sh installs chromium and chromium-driver)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def headless_chromium(*extra_args: str, window: str = "1280,1600") -> Iterator[Any]:
    """A `selenium.webdriver.Chrome` on the machine's chromium, quit on exit. As root in a container chromium
    needs --no-sandbox; /dev/shm is small there, hence --disable-dev-shm-usage."""
    from selenium import webdriver

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium is not None and chromedriver is not None, "install Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}", "--no-first-run", "--disable-extensions", *extra_args):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()
