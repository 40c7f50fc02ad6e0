"""Test-wide fixtures: an isolated kubetrain state directory for every test, and the API emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["kube_emulator.pytest_plugin"]

# The shared helpers hold asserts (and fixtures); rewrite them as pytest does test modules, for readable failures.
pytest.register_assert_rewrite("tests.support")


@pytest.fixture(autouse=True)
def kubetrain_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Jobs, logs and templates of a test never touch the user's real state directory."""
    home = tmp_path / "kubetrain-home"
    monkeypatch.setenv("KUBETRAIN_HOME", str(home))
    monkeypatch.delenv("KUBETRAIN_TEMPLATES", raising=False)
    yield home
