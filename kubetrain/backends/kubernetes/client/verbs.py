"""The verbs on objects: get, find, create, merge-patch, delete, delete a collection, list (every page)."""

from __future__ import annotations

from collections.abc import Callable

from .errors import ApiError
from .resources import Resource
from .transport import JSON, Transport, query


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
    def list(
        self,
        res: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        keep: Callable[[JSON], JSON] | None = None,
    ) -> tuple[list[JSON], str]:
        """(items, the list's resourceVersion), every page. ``keep``: what of each item is kept, page by page (a
        list of 10,000 whole pods is never held at once)."""
        items: list[JSON] = []
        token: str | None = None
        while True:
            out = self.request(
                "GET",
                res.path(namespace),
                query(labelSelector=label_selector, fieldSelector=field_selector, limit=500, **{"continue": token}),
            )
            for item in out.get("items") or []:
                # Items of built-in lists carry no apiVersion/kind.
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(keep(item) if keep is not None else item)
            meta = out.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")


__all__ = ["Verbs"]
