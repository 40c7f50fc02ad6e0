"""A store moved aside under a running job does not hide it: the job is found again from its folder (its
supervisor's state file) by `list`, which says the store has no record of it, and by `cancel` and `delete`,
which stop it, so no replica runs on unseen."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    alive,
    cli,
    local_backend,
    no_process_left_behind,
    running_sleepers,
    wait_gone,
)

pytestmark = pytest.mark.timeout(120)


def _move_store_aside() -> Path:
    with local_backend() as backend:
        db = backend.store.db_path
    aside = db.with_name(db.name + ".aside")
    db.rename(aside)
    return aside


@pytest.mark.parametrize("verb", ["cancel", "delete"])
def test_a_job_whose_store_was_moved_aside_is_listed_and_stopped(tmp_path: Path, verb: str) -> None:
    job_id, supervisor, replicas = running_sleepers(tmp_path, "aside")
    _move_store_aside()
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    line = next((row for row in listed.stdout.splitlines() if row.startswith(job_id)), None)
    assert line is not None and "not in the store" in line, listed.stdout
    status = cli("status", job_id)
    assert status.returncode == 0 and "has no record of it" in status.stdout + status.stderr, status
    stopped = cli(verb, job_id)
    assert stopped.returncode == 0, stopped.stderr
    wait_gone([supervisor, *replicas.values()], timeout=60)
    assert job_id not in cli("list").stdout
