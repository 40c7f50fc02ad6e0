"""The jobs table's live updates carry only what changed (`kubetrain.ui.table_diff`): with a thousand jobs,
a page must not redraw every row when one job moved, nor any row when nothing did."""

from __future__ import annotations

from typing import Any

from kubetrain.ui.table_diff import TableState, is_empty, row_key, rows_digest


def job(n: int, phase: str = "Running", ready: int = 2) -> dict[str, Any]:
    return {"backend": "local", "id": f"job-{n}", "phase": phase, "ready": ready, "total": 2, "created_at": n}


def test_a_page_rendered_with_the_current_rows_is_sent_nothing() -> None:
    rows = [job(n) for n in range(1000, 0, -1)]
    state = TableState.of(rows)
    event = state.changes([dict(r) for r in rows], [])
    assert is_empty(event) and event == {"upsert": [], "order": None, "errors": []}


def test_one_changed_row_is_the_only_row_sent() -> None:
    rows = [job(n) for n in range(1000, 0, -1)]
    state = TableState.of(rows)
    moved = list(rows)
    moved[500] = job(500, "Succeeded")
    event = state.changes(moved, [])
    assert event["upsert"] == [job(500, "Succeeded")] and event["order"] is None
    assert is_empty(state.changes(moved, []))  # the state follows what was sent


def test_a_new_or_removed_job_sends_the_order() -> None:
    state = TableState.of([job(2), job(1)])
    added = state.changes([job(3), job(2), job(1)], [])
    assert added["upsert"] == [job(3)] and added["order"] == ["local/job-3", "local/job-2", "local/job-1"]
    removed = state.changes([job(3), job(1)], ["kubernetes: unreachable"])
    assert removed == {"upsert": [], "order": ["local/job-3", "local/job-1"], "errors": ["kubernetes: unreachable"]}


def test_an_empty_state_is_sent_every_row() -> None:
    rows = [job(2), job(1)]
    event = TableState().changes(rows, [])
    assert event["upsert"] == rows and event["order"] == [row_key(r) for r in rows]


def test_the_digest_tells_rows_apart() -> None:
    rows = [job(2), job(1)]
    assert rows_digest(rows) == rows_digest([dict(r) for r in rows])
    assert rows_digest(rows) != rows_digest([job(2), job(1, "Failed")])
    assert rows_digest(rows) != rows_digest(list(reversed(rows)))
