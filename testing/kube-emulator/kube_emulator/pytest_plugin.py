"""pytest fixtures for the Kubernetes API emulator.

Load with ``pytest_plugins = ["kube_emulator.pytest_plugin"]`` in a ``conftest.py`` (kubetrain: ``tests/conftest.py``).

- ``kube_emulator_server`` (session): the running server, started once per session (per xdist worker).
- ``kube_emulator``: the same server after ``reset()``: a fresh cluster for this test.
  ``@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io", ...)`` installs only the CRDs named
  (no arguments: none); unmarked tests get every CRD under ``kube_emulator/crds``.
- ``kube_config_file``: a kubeconfig for this test (token auth, namespace ``default``).
- ``kube_api_client``: a ``kubernetes.client.ApiClient`` built from that file alone.
- ``kube_dynamic_client``: a ``kubernetes.dynamic.DynamicClient`` with a per-test discovery cache
  (the default cache file is shared across tests by host:port and would go stale).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .emulator import KubeEmulator

_LOOPBACK = "127.0.0.1,localhost"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kube_crds(*names): the CRDs the Kubernetes emulator serves in this test "
        "(default: all under kube_emulator/crds; no names: none)",
    )


@pytest.fixture(scope="session")
def kube_emulator_server() -> Iterator[KubeEmulator]:
    # The kubernetes client reads HTTP(S)_PROXY from the environment; loopback must bypass it,
    # including for clients the code under test builds itself from the kubeconfig.
    saved = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
    for key, value in saved.items():
        os.environ[key] = f"{value},{_LOOPBACK}" if value else _LOOPBACK
    # Strict, unlike a default emulator: every request of the code under test must carry the kubeconfig's
    # token, so a client that stopped sending it fails the tests instead of passing as anonymous.
    emulator = KubeEmulator(anonymous=False).start()
    try:
        yield emulator
    finally:
        emulator.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def kube_emulator(kube_emulator_server: KubeEmulator, request: pytest.FixtureRequest) -> Iterator[KubeEmulator]:
    marker = request.node.get_closest_marker("kube_crds")
    kube_emulator_server.reset(list(marker.args) if marker is not None else None)
    yield kube_emulator_server
    errors = kube_emulator_server.server_errors
    kube_emulator_server.end_streams()
    if errors:
        pytest.fail("the Kubernetes emulator failed internally:\n" + "\n".join(errors), pytrace=False)


@pytest.fixture
def kube_config_file(kube_emulator: KubeEmulator, tmp_path: Path) -> Path:
    return kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kube_api_client(kube_emulator: KubeEmulator, kube_config_file: Path) -> Iterator[Any]:
    client = kube_emulator.api_client(kube_config_file)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_dynamic_client(kube_api_client: Any, tmp_path: Path) -> Any:
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(kube_api_client, cache_file=str(tmp_path / "discovery-cache.json"))
