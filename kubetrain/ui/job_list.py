"""The jobs table for hundreds of jobs: which rows a page shows, in which order, as its address says.

Everything the table shows is in the address's query (`?sort=duration&dir=desc&phase=Failed&q=resnet&page=2`),
so a reload, a link or the browser's back button shows the same table. The query, never the fragment: the
fragment carries the page's token on its first load (`security.py`), and the two are kept apart.

A query is read leniently: a value the table does not know (a sort key, a phase, a page past the last) is
replaced by the default, as a person who edits an address expects, and the page shows what it did show.
Pure functions over `JobRow`s: the app renders the result (`pages.py`), the live stream diffs it
(`table_diff.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from ..status import JobPhase
from .views import JobRow

PER_PAGE = (25, 50, 100, 200)
"""The page sizes offered; the first page of a thousand jobs is drawn in a few milliseconds at any of them."""
DEFAULT_PER_PAGE = 50
PHASES = tuple(p.value for p in JobPhase)


def _duration(row: JobRow, now: float) -> float | None:
    """Seconds the job ran: to its end once ended, to now while it runs, None if it never started."""
    if row.started_at is None:
        return None
    end = row.finished_at if row.finished_at is not None else now
    return max(0.0, end - row.started_at)


SortKey = Callable[[JobRow, float], Any]
SORTS: dict[str, tuple[str, SortKey, bool]] = {
    # key: (column heading, the row's value, descending first: times and counts show the largest first)
    "name": ("name", lambda r, _n: r.id.lower(), False),
    "backend": ("backend", lambda r, _n: (r.backend, r.namespace or ""), False),
    "framework": ("framework", lambda r, _n: r.framework or None, False),
    "phase": ("phase", lambda r, _n: r.phase, False),
    "replicas": ("replicas", lambda r, _n: (r.ready, r.total), True),
    "restarts": ("restarts", lambda r, _n: r.restarts, True),
    "created": ("created", lambda r, _n: r.created_at, True),
    "started": ("started", lambda r, _n: r.started_at, True),
    "ended": ("ended", lambda r, _n: r.finished_at, True),
    "duration": ("duration", _duration, True),
    "reason": ("reason", lambda r, _n: r.reason.lower() if r.reason else None, False),
}
DEFAULT_SORT = "created"


@dataclass(frozen=True)
class ListQuery:
    """What the jobs table shows: its order, filters and page."""

    sort: str = DEFAULT_SORT
    desc: bool = True
    phase: str = ""
    q: str = ""
    page: int = 1
    per: int = DEFAULT_PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListQuery:
        sort = params.get("sort", DEFAULT_SORT)
        if sort not in SORTS:
            sort = DEFAULT_SORT
        direction = params.get("dir", "")
        desc = SORTS[sort][2] if direction not in ("asc", "desc") else direction == "desc"
        phase = params.get("phase", "")
        return cls(
            sort=sort,
            desc=desc,
            phase=phase if phase in PHASES else "",
            q=params.get("q", "").strip()[:200],
            page=_whole(params.get("page"), 1, minimum=1),
            per=p if (p := _whole(params.get("per"), DEFAULT_PER_PAGE)) in PER_PAGE else DEFAULT_PER_PAGE,
        )

    def params(self) -> dict[str, str]:
        """The query's parameters that differ from the defaults (a short address for the default table)."""
        out: dict[str, str] = {}
        if self.sort != DEFAULT_SORT or self.desc != SORTS[self.sort][2]:
            out["sort"] = self.sort
            out["dir"] = "desc" if self.desc else "asc"
        if self.phase:
            out["phase"] = self.phase
        if self.q:
            out["q"] = self.q
        if self.page != 1:
            out["page"] = str(self.page)
        if self.per != DEFAULT_PER_PAGE:
            out["per"] = str(self.per)
        return out

    def query_string(self) -> str:
        """`?sort=...` (or '' for the default table)."""
        params = self.params()
        return "?" + urlencode(params) if params else ""

    def sorted_by(self, key: str) -> ListQuery:
        """The table sorted by `key`: its other direction if it is the current key, else its natural one;
        back to the first page (page 7 of another order shows other jobs)."""
        desc = not self.desc if key == self.sort else SORTS[key][2]
        return replace(self, sort=key, desc=desc, page=1)

    def on_page(self, page: int) -> ListQuery:
        return replace(self, page=page)


def _whole(value: str | None, default: int, minimum: int = 0) -> int:
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if number >= minimum else default


@dataclass
class ListPage:
    """The rows of one page of the table and what the page says about the rest."""

    query: ListQuery
    rows: list[JobRow]
    total: int
    """Jobs in every backend shown."""
    matching: int
    """Jobs that pass the filters."""
    pages: int
    phases: dict[str, int] = field(default_factory=dict)
    """Jobs per phase among those the name search keeps (the phase filter's counts)."""

    @property
    def first(self) -> int:
        """The 1-based position of the page's first row among the matching jobs (0: none)."""
        return (self.query.page - 1) * self.query.per + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def select(rows: Sequence[JobRow], query: ListQuery, now: float) -> ListPage:
    """The page of `rows` that `query` asks for (a page past the last is the last)."""
    needle = query.q.lower()
    searched = [r for r in rows if needle in r.id.lower() or needle in r.name.lower()] if needle else list(rows)
    phases: dict[str, int] = {}
    for r in searched:
        phases[r.phase] = phases.get(r.phase, 0) + 1
    kept = [r for r in searched if r.phase == query.phase] if query.phase else searched
    _label, key, _desc = SORTS[query.sort]
    # A row without the value (a job that never started has no duration) goes last in either direction.
    known = [(v, r) for r in kept if (v := key(r, now)) is not None]
    unknown = [r for r in kept if key(r, now) is None]
    known.sort(key=lambda pair: pair[0], reverse=query.desc)
    ordered = [r for _v, r in known] + unknown
    pages = max(1, math.ceil(len(ordered) / query.per))
    page = min(query.page, pages)
    query = query.on_page(page) if page != query.page else query
    start = (page - 1) * query.per
    return ListPage(query, ordered[start : start + query.per], len(rows), len(ordered), pages, phases)


__all__ = ["DEFAULT_PER_PAGE", "PER_PAGE", "PHASES", "SORTS", "ListPage", "ListQuery", "select"]
