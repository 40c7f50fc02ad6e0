"""A list of several pages asks for the next page while it reads this one (the server's time to answer overlaps
the client's decoding), and stays what it was: every item once, in order, an expired token an error."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import KubeEmulator

from kubetrain.backends.kubernetes.client.config import connect
from kubetrain.backends.kubernetes.client.errors import ApiError
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.client.resources import CONFIGMAPS
from kubetrain.backends.kubernetes.client.verbs import PAGE, continue_ahead
from tests.support.cluster import FAST_RETRY

COUNT = 2 * PAGE + 7  # three pages


@pytest.fixture
def kube(kube_emulator: KubeEmulator, kube_config_file: Path) -> Kube:
    for i in range(COUNT):
        kube_emulator.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": f"c{i:04d}", "namespace": "default", "labels": {"set": "a"}}})
    return Kube(connect(kube_config_file).api_client, FAST_RETRY)


def pages_asked(emu: KubeEmulator) -> int:
    return sum(1 for r in emu.requests if r.path.endswith("/configmaps") and r.query.get("limit") == str(PAGE))


def test_every_item_once_in_order_over_three_pages(kube: Kube, kube_emulator: KubeEmulator) -> None:
    items, rv = kube.list(CONFIGMAPS, "default", label_selector="set=a")
    assert [i["metadata"]["name"] for i in items] == [f"c{i:04d}" for i in range(COUNT)]
    assert all(i["kind"] == "ConfigMap" for i in items) and rv
    assert pages_asked(kube_emulator) == 3


def test_the_next_page_is_asked_for_before_this_one_is_read(kube: Kube, kube_emulator: KubeEmulator) -> None:
    """``keep`` sees the first item of the first page only after the decoding began; by then the second page's
    request is on its way: it reaches the server while the first page is still being read (waited for here)."""
    reached: list[bool] = []

    def keep(item: dict[str, Any]) -> dict[str, Any]:
        if item["metadata"]["name"] == "c0000":
            deadline = time.monotonic() + 30
            while pages_asked(kube_emulator) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            reached.append(pages_asked(kube_emulator) >= 2)
        return {"name": item["metadata"]["name"]}

    items, _ = kube.list(CONFIGMAPS, "default", label_selector="set=a", keep=keep)
    assert reached == [True]
    assert len(items) == COUNT


class ExpiringKube(Kube):
    """The emulator's answers, but a continue token is answered 410 Expired (as the API server does once etcd has
    compacted the list's version): a page asked for ahead fails on its thread."""

    def fetch(self, method: str, path: str, query: Any = (), *args: Any, **kwargs: Any) -> bytes:
        if any(key == "continue" for key, _ in query):
            raise ApiError(410, "Expired", "The provided continue parameter is too old")
        return super().fetch(method, path, query, *args, **kwargs)


def test_an_error_answering_a_page_asked_ahead_is_raised_by_the_list(
        kube: Kube, kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    expiring = ExpiringKube(connect(kube_config_file).api_client, FAST_RETRY)
    with pytest.raises(ApiError) as err:
        expiring.list(CONFIGMAPS, "default", label_selector="set=a")
    assert err.value.gone


def test_the_token_is_read_from_the_page_head_only() -> None:
    head = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc="},"items":['
    assert continue_ahead(head + b'{"metadata":{"name":"x"}}]}') == "abc="
    # No token in the list's metadata: one inside an item is not taken for it.
    assert continue_ahead(b'{"metadata":{"resourceVersion":"9"},"items":[{"data":{"continue":"x"}}]}') is None
    # Items before metadata (not the API server's order): decoded first, as without the look-ahead.
    assert continue_ahead(b'{"items":[],"metadata":{"continue":"abc="}}') is None
