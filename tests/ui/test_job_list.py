"""The jobs table for hundreds of jobs (`kubetrain.ui.job_list`): which rows a page shows, in which order,
as the address's query says, and how a query a person edited by hand is read."""

from __future__ import annotations

from kubetrain.ui.job_list import ListQuery, select
from kubetrain.ui.views import JobRow

NOW = 10_000.0


def row(n: int, phase: str = "Running", *, started: float | None = None, ended: float | None = None,
        reason: str | None = None, name: str = "job") -> JobRow:  # fmt: skip
    return JobRow(backend="local", id=f"{name}-{n:03d}", name=name, namespace=None, framework="pytorch", phase=phase,
                  ready=0, total=2, restarts=n % 3, created_at=float(n), reason=reason, started_at=started,
                  finished_at=ended)  # fmt: skip


def ids(rows: list[JobRow]) -> list[str]:
    return [r.id for r in rows]


def test_a_query_is_read_leniently_and_written_short() -> None:
    assert ListQuery.parse({}) == ListQuery()
    assert ListQuery().query_string() == ""  # the default table's address is /
    odd = ListQuery.parse({"sort": "nope", "dir": "sideways", "phase": "<b>", "page": "-3", "per": "7"})
    assert odd == ListQuery()
    q = ListQuery.parse({"sort": "name", "phase": "Failed", "q": " resnet ", "page": "2", "per": "100"})
    assert (q.sort, q.desc, q.phase, q.q, q.page, q.per) == ("name", False, "Failed", "resnet", 2, 100)
    assert ListQuery.parse(q.params()) == q  # what the address says is what it reads back


def test_sorting_by_a_column_toggles_and_starts_at_the_first_page() -> None:
    q = ListQuery(page=3)
    by_name = q.sorted_by("name")
    assert (by_name.sort, by_name.desc, by_name.page) == ("name", False, 1)  # names: A first
    assert by_name.sorted_by("name").desc is True  # the same heading again: the other way
    assert q.sorted_by("duration").desc is True  # durations: the longest first


def test_a_duration_runs_to_now_and_jobs_without_one_come_last_either_way() -> None:
    rows = [
        row(1, "Succeeded", started=100.0, ended=400.0),  # 300 s
        row(2, "Running", started=9_000.0),  # 1,000 s so far
        row(3, "Pending"),  # never started
        row(4, "Failed", started=50.0, ended=60.0),  # 10 s
    ]
    longest = select(rows, ListQuery(sort="duration", desc=True), NOW).rows
    assert ids(longest) == ["job-002", "job-001", "job-004", "job-003"]
    shortest = select(rows, ListQuery(sort="duration", desc=False), NOW).rows
    assert ids(shortest) == ["job-004", "job-001", "job-002", "job-003"]


def test_filters_search_and_pages() -> None:
    rows = [row(n, "Failed" if n % 4 == 0 else "Running", name="resnet" if n % 2 else "bert") for n in range(200)]
    rows.sort(key=lambda r: -(r.created_at or 0))
    page = select(rows, ListQuery(q="RESNET", per=25, page=2), NOW)
    assert (page.total, page.matching, page.pages, page.first, page.last) == (200, 100, 4, 26, 50)
    assert all(r.name == "resnet" for r in page.rows) and len(page.rows) == 25
    assert page.phases == {"Running": 100}  # among the jobs the search keeps
    failed = select(rows, ListQuery(phase="Failed", q="bert"), NOW)
    assert failed.matching == 50 and {r.phase for r in failed.rows} == {"Failed"}
    past = select(rows, ListQuery(page=99), NOW)  # past the last page: the last one
    assert past.query.page == past.pages == 4 and ids(past.rows) == ids(rows[150:])
    none = select(rows, ListQuery(q="no such job"), NOW)
    assert none.rows == [] and none.pages == 1 and (none.first, none.last) == (0, 0)
