"""The restart rules the planner hands the local supervisor (through the launch record): per role, with the
backoffLimit default applied and the back-off between restarts; and the elastic start size in the plan."""

from __future__ import annotations

from typing import Any

from kubetrain.plan import plan
from kubetrain.restart_policy import LOCAL_BACKOFF_BASE, LOCAL_BACKOFF_MAX, RestartRules, backoff_delay
from tests.support.helpers import make_job


def rules_of(**spec: Any) -> RestartRules:
    base: dict[str, Any] = {"framework": "generic", "replicas": 2, "run": {"python": ["t.py"]}}
    return plan(make_job({**base, **spec})).restart


def test_the_plan_resolves_policy_and_limit() -> None:
    assert (rules_of().policy, rules_of().backoff_limit) == ("Never", 0)
    alone = rules_of(runPolicy={"backoffLimit": 2})
    assert (alone.policy, alone.backoff_limit, alone.may_restart()) == ("OnFailure", 2, True)
    default = rules_of(restartPolicy="OnFailure")
    assert (default.policy, default.backoff_limit) == ("OnFailure", 6)
    assert rules_of(restartPolicy="ExitCode").backoff_limit == 6


def test_rules_per_role() -> None:
    rules = rules_of(replicas=None, restartPolicy="OnFailure", runPolicy={"backoffLimit": 3},
                     roles={"driver": {"restartPolicy": "Never"}, "worker": {"replicas": 2},
                            "ps": {"restartPolicy": "ExitCode"}}, exitCodes={"retryable": [3]})
    assert rules.roles == {"driver": "Never", "ps": "ExitCode"}  # only the roles that differ
    assert [rules.policy_of(r) for r in ("driver", "worker", "ps")] == ["Never", "OnFailure", "ExitCode"]
    assert not rules.retryable_exit(1, "driver")
    assert rules.retryable_exit(1, "worker")
    assert not rules.retryable_exit(1, "ps") and rules.retryable_exit(3, "ps") and rules.retryable_exit(-9, "ps")
    assert rules.why_not(1, "driver") == "not retried: role driver's restartPolicy Never"
    assert rules.why_not(1, "ps") == "not retried: exit code 1 is permanent under role ps's restartPolicy ExitCode"
    # The launch record carries them: the supervisor reads back the same rules.
    assert RestartRules.from_dict(rules.to_dict()) == rules
    assert rules.to_dict()["roles"] == {"driver": "Never", "ps": "ExitCode"}


def test_a_record_without_the_new_keys_reads_as_before() -> None:
    old = {"policy": "OnFailure", "backoffLimit": 2, "retryable": [], "permanent": []}
    rules = RestartRules.from_dict(old)
    assert (rules.roles, rules.backoff_base, rules.backoff_max) == ({}, LOCAL_BACKOFF_BASE, LOCAL_BACKOFF_MAX)
    assert rules.to_dict() == old


def test_back_off_doubles_from_the_base_up_to_the_cap() -> None:
    assert (LOCAL_BACKOFF_BASE, LOCAL_BACKOFF_MAX) == (1.0, 60.0)
    assert [backoff_delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff_delay(10_000) == 60  # no overflow
    assert [backoff_delay(n, 10, 360) for n in range(7)] == [10, 20, 40, 80, 160, 320, 360]  # Kubernetes'
    assert backoff_delay(3, 0) == 0
    custom = RestartRules(backoff_base=0.5, backoff_max=3)
    assert [custom.delay(n) for n in range(4)] == [0.5, 1, 2, 3]
    assert RestartRules.from_dict(custom.to_dict()) == custom


def test_expected_replicas_is_how_many_workers_the_plan_starts() -> None:
    job = make_job({"framework": "pytorch", "run": {"python": ["t.py"]},
                    "elastic": {"minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3}})
    the_plan = plan(job)
    assert [(r.role, r.index) for r in the_plan.replicas] == [("worker", 0), ("worker", 1), ("worker", 2)]
    env = the_plan.replicas[0].processes[0].env
    assert env["PET_NNODES"] == "1:4"
