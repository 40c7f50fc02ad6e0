"""The cells a flavor's `Features` record decides: for the fields render accepts or refuses by a flavor's record
(`contract.features.FEATURES`), each flavor's cell is worked out from that record, never written per flavor.
So a record says a fact once: change it, and render, the table, docs/parity.md and the tests that hold the
table to render all follow. Each function gives every flavor's cell of one field (or one value of it); a
refusal names the flavors whose records can, as render's refusal does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..contract.features import Features
from .cells import Cell, ok, refused, same

Records = Mapping[str, Features]
"""Each flavor's record, by name (`FEATURES`, or another to see what the table would say)."""

_POLICIES = {
    "Running": "stops a finished job's running pods",
    "All": "deletes every pod when the job ends",
    "None": "leaves a finished job's running pods running",
}
"""What each runPolicy.cleanPodPolicy asks of the engine."""


def able(records: Records, test: Callable[[Features], bool]) -> str:
    """The flavors whose records pass `test`, as a refusal suggests them: `use the job or kubeflow flavor`."""
    names = [name for name, f in records.items() if test(f)]
    if not names:
        return "no flavor can"
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"use the {listed} flavor"


def by_record(records: Records, test: Callable[[Features], bool], why: str, honoured: Cell | None = None) -> dict[
        str, Cell]:
    """`honoured` (default ✓) on each flavor whose record passes `test`, else refused: `why`, and which can."""
    refusal = refused(f"{why}: {able(records, test)}")
    return {name: (honoured or ok()) if test(f) else refusal for name, f in records.items()}


def framework_generic(records: Records) -> dict[str, Cell]:
    return by_record(records, lambda f: f.every_framework, "its engine has a kind per framework, none for generic jobs")


def suspend(records: Records) -> dict[str, Cell]:
    return by_record(records, lambda f: f.suspend, "its engine cannot create a job suspended")


def deadline(records: Records) -> dict[str, Cell]:
    return by_record(records, lambda f: f.deadline, "its engine has no deadline for a job")


def exit_code_overrides(records: Records) -> dict[str, Cell]:
    return by_record(records, lambda f: f.exit_code_overrides, "its engine's ExitCode rule is fixed")


def terminate_after_preemption(records: Records) -> dict[str, Cell]:
    return by_record(records, lambda f: f.terminate_after_preemption, "its engine restarts preempted pods")


def gpu_sharing_scheduler(records: Records, why: str = "its engine schedules its own pods") -> dict[str, Cell]:
    """A GPU share whose own scheduler must place the pods (Run:ai, Alibaba Cloud's gpushare)."""
    return by_record(records, lambda f: f.pod_scheduler, why)


def trials(records: Records, how: str) -> dict[str, Cell]:
    return by_record(records, lambda f: f.trials,
                     "its engine starts a job's pods together and restarts them as one", ok(how))


def success_roles(records: Records) -> dict[str, Cell]:
    """The samples name the first role, which is what an engine without the feature waits for anyway."""
    return {name: ok() if f.success_roles else same("the job completes when its first role does: its engine's "
                                                   "own rule") for name, f in records.items()}


def clean_pod_policy(records: Records, value: str) -> dict[str, Cell]:
    """Honoured where the record lists the value: as what the engine does anyway where it is the only one."""
    out: dict[str, Cell] = {}
    for name, f in records.items():
        does = " or ".join(_POLICIES[p] for p in f.clean_pod_policies)
        if value not in f.clean_pod_policies:
            out[name] = refused(f"its engine only {does}: {able(records, lambda g: value in g.clean_pod_policies)}")
        else:
            out[name] = same(f"its engine {does}") if f.clean_pod_policies == (value,) else ok()
    return out


def gang(records: Records, *, queue: bool) -> dict[str, Cell]:
    """scheduling.gang: true, with or without a queue: refused where the engine gangs no job; where its gang is
    Kueue's, refused without a queue and, with one, what Kueue does anyway (it admits the job whole)."""
    out: dict[str, Cell] = {}
    for name, f in records.items():
        if not f.gang:
            out[name] = refused(f"its engine gangs no job: {able(records, lambda g: g.gang)}")
        elif f.gang_needs_kueue:
            out[name] = same("Kueue admits the job whole") if queue else refused(
                "its gang is Kueue's: needs scheduling.queue")
        else:
            out[name] = ok()
    return out


def min_available(records: Records) -> dict[str, Cell]:
    """A gang smaller than the job (the samples ask for 1 of 2)."""
    out: dict[str, Cell] = {}
    for name, f in records.items():
        if f.partial_gang:
            out[name] = ok()
        elif f.gang:
            out[name] = refused(f"its engine gangs only the whole job: {able(records, lambda g: g.partial_gang)}")
        else:
            out[name] = refused(f"its engine gangs no job: {able(records, lambda g: g.partial_gang)}")
    return out


__all__ = [
    "Records",
    "able",
    "by_record",
    "clean_pod_policy",
    "deadline",
    "exit_code_overrides",
    "framework_generic",
    "gang",
    "gpu_sharing_scheduler",
    "min_available",
    "success_roles",
    "suspend",
    "terminate_after_preemption",
    "trials",
]
