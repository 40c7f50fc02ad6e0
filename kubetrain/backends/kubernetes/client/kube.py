"""``Kube``: the client, one object per cluster, composed of the concerns of this package."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .discovery import Discovery
from .resources import Resource, catalogue
from .retry import RetryPolicy
from .streams import Streams
from .verbs import Verbs


class Kube(Verbs, Streams, Discovery):
    """Requests to one cluster, objects as dicts. Thread-safe (both transports' pools are).

    ``known``: kinds whose place in the API is known without discovery (beyond the core ones), e.g. the
    flavors' workloads.
    """

    def __init__(self, api_client: Any, retry: RetryPolicy | None = None, timeout: float = 30.0, *,
                 known: Iterable[Resource] = ()) -> None:
        super().__init__(api_client, retry, timeout)
        self._discovered = {}
        self._known = catalogue(known)


__all__ = ["Kube"]
