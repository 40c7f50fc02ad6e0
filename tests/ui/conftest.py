"""Fixtures of the web view's tests: a local backend and the web view served over it on a thread.

Skipped as a whole, saying why, where the optional extra `kubetrain[ui]` is not installed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui import INSTALL_HINT, missing_dependencies
from tests.ui.helpers import TOKEN

# The test extra installs kubetrain[ui]: without it the web view's tests fail here, saying what to install.
assert not missing_dependencies(), f"the web view's extra is not installed ({INSTALL_HINT})"

from kubetrain.ui.server import Background  # noqa: E402 (needs the extra, checked above)


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    backend = LocalBackend()
    try:
        yield backend
    finally:
        for status in backend.list():  # a test that stopped early leaves no job running
            if not status.phase.is_terminal:
                with contextlib.suppress(Exception):
                    backend.cancel(status.job_id)
        backend.close()


@pytest.fixture
def server(local: LocalBackend) -> Iterator[Background]:
    with Background([local], token=TOKEN) as bg:
        yield bg


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by selenium: one per test module."""
    from tests.support.browser import headless_chromium

    with headless_chromium() as driver:
        yield driver
