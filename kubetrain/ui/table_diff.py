"""The jobs table's live updates as changes: only the rows that differ, and the rows' order when it moved.

With a thousand jobs in the store, redrawing every row on every update costs the page a quarter of a second
of work for nothing (the first update after loading the page usually changes nothing at all). So each
event stream remembers what its page shows and sends only what differs:

- `upsert`: the rows that are new or changed (the page replaces those rows, and only those);
- `order`: every row's key in display order, sent only when the set or order of keys changed (the page
  drops the rows not in it and moves the rest into place);
- `errors`: the sources that could not be read (sent on every event: a short list).

The page says what it was rendered with by a digest in its stream's address (`?have=`): when the rows
have not changed since, the stream's first event changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


def row_key(row: Row) -> str:
    """A row's key on the page (its `data-key`): the backend and the job id."""
    return f"{row['backend']}/{row['id']}"


def rows_digest(rows: Sequence[Row]) -> str:
    """A short fingerprint of rows as the page received them (JSON of the view model, in order)."""
    text = json.dumps(list(rows), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class TableState:
    """What one page's jobs table shows, as the stream last told it (or as it was rendered)."""

    rows: dict[str, Row] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, rows: Sequence[Row]) -> TableState:
        return cls({row_key(r): r for r in rows}, [row_key(r) for r in rows])

    def changes(self, rows: Sequence[Row], errors: Sequence[str]) -> dict[str, Any]:
        """The event that brings a page showing this state to `rows`; the state becomes `rows`."""
        order = [row_key(r) for r in rows]
        upsert = [r for key, r in zip(order, rows, strict=True) if self.rows.get(key) != r]
        event: dict[str, Any] = {
            "upsert": upsert,
            "order": order if order != self.order else None,
            "errors": list(errors),
        }
        self.rows = dict(zip(order, rows, strict=True))
        self.order = order
        return event


def is_empty(event: dict[str, Any]) -> bool:
    """True when the event changes no row (its errors may still be news)."""
    return not event["upsert"] and event["order"] is None


__all__ = ["TableState", "is_empty", "row_key", "rows_digest"]
