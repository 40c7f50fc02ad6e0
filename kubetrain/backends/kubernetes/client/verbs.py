"""The verbs on objects: get, find, create, merge-patch, delete, delete a collection, list (every page)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .ahead import Ahead
from .errors import ApiError
from .resources import Resource
from .transport import JSON, Transport, query

Kept = TypeVar("Kept")
"""What a list keeps of each item (``keep``)."""

#: Objects per page of a list, as kubectl asks.
PAGE = 500

#: A list's ``metadata.continue``, read before its items: the API server writes ``metadata`` first.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]+)"')


def continue_ahead(page: bytes) -> str | None:
    """The next page's token as the page's head says it, before the page is decoded (None when it has none, or
    its head is not in the API server's order: the page is then decoded first, as before)."""
    items = page.find(b'"items"', 0, 4096)
    if items < 0:
        return None
    found = _CONTINUE.search(page, 0, items)
    return found.group(1).decode("ascii") if found else None


class Verbs(Transport):
    """CRUD on objects as dicts."""

    def get(self, res: Resource, name: str, namespace: str | None) -> JSON:
        return self.request("GET", res.path(namespace, name))

    def find(self, res: Resource, name: str, namespace: str | None) -> JSON | None:
        try:
            return self.get(res, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def create(self, res: Resource, body: JSON, namespace: str | None, *, dry_run: bool = False) -> JSON:
        """One POST, never retried here (see :mod:`..submit`)."""
        return self.request("POST", res.path(namespace), query(dryRun="All" if dry_run else None), body)

    def merge_patch(self, res: Resource, name: str, namespace: str | None, patch: JSON) -> JSON:
        return self.request("PATCH", res.path(namespace, name), (), patch, "application/merge-patch+json")

    def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        *,
        propagation: str | None = "Background",
        dry_run: bool = False,
    ) -> JSON | None:
        """Delete; None if it was already gone."""
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            return self.request("DELETE", res.path(namespace, name), query(dryRun="All" if dry_run else None), body)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def delete_collection(self, res: Resource, namespace: str, label_selector: str,
                          field_selector: str | None = None) -> None:
        self.request("DELETE", res.path(namespace),
                     query(labelSelector=label_selector, fieldSelector=field_selector),
                     {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})

    # Last in the class: a method named `list` shadows the builtin in the annotations that follow it.
    @overload
    def list(self, res: Resource, namespace: str | None, *, label_selector: str | None = None,
             field_selector: str | None = None, keep: None = None, page: int = PAGE) -> tuple[list[JSON], str]: ...

    @overload
    def list(self, res: Resource, namespace: str | None, *, label_selector: str | None = None,
             field_selector: str | None = None, keep: Callable[[JSON], Kept], page: int = PAGE,
             ) -> tuple[list[Kept], str]: ...

    def list(
        self,
        res: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        keep: Callable[[JSON], Any] | None = None,
        page: int = PAGE,
    ) -> tuple[list[Any], str]:
        """(items, the list's resourceVersion), every page. ``keep``: what of each item is kept, page by page (a
        list of 10,000 whole pods is never held at once); ``page``: items a page (kubectl's 500). The next page is
        asked for while this one is read."""
        items: list[Any] = []
        path = res.path(namespace)

        def fetch(token: str | None) -> bytes:
            return self.fetch("GET", path, query(labelSelector=label_selector, fieldSelector=field_selector,
                                                 limit=page, **{"continue": token}))

        raw = fetch(None)
        while True:
            ahead_token = continue_ahead(raw)
            # The next page asked for now, while this one is decoded and read: the server's time to answer
            # overlaps ours (10 ms a page of 500 pods; 20 pages at 10,000 replicas).
            ahead = Ahead(functools.partial(fetch, ahead_token), "list-page") if ahead_token else None
            out = json.loads(raw) if raw else {}
            del raw
            for item in out.get("items") or []:
                # Items of built-in lists carry no apiVersion/kind.
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(keep(item) if keep is not None else item)
            meta = out.get("metadata") or {}
            token = meta.get("continue")
            # The page read is dropped before the next is taken: with ``keep``, one page of whole objects is held
            # at a time, not two (a page of 500 pods is several MB once parsed).
            del out
            if not token:
                return items, str(meta.get("resourceVersion") or "")
            raw = ahead.result() if ahead is not None and ahead_token == token else fetch(token)


__all__ = ["Verbs"]
