"""Following a big job: the watch keeps each pod's essentials (what kubetrain reads), a change of nothing it reads
wakes no one, status is worked out once per change and per pod only for the pods that changed, and a failure
among 10,000 replicas is still reported. Emulator only."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest

from kubetrain.backends.kubernetes.client.resources import JOBS
from kubetrain.backends.kubernetes.describe import Description
from kubetrain.backends.kubernetes.diagnose import diagnose
from kubetrain.backends.kubernetes.essentials import pod_essentials, same_essentials
from kubetrain.backends.kubernetes.flavors import flavor_of
from kubetrain.backends.kubernetes.follow import job_state
from kubetrain.backends.kubernetes.lookup import ordered
from kubetrain.backends.kubernetes.status_map import PodCache, RoleInfo, group_pods, job_status, roles_of
from kubetrain.backends.kubernetes.watch import JobWatch
from kubetrain.contract.logs import parse_time
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase, ReplicaPhase
from kubetrain.terminal import OutputSink
from tests.support.cluster import Cluster, controllers, emulated, job_doc, now  # noqa: F401

NS = "default"


def _job_with_every_kind_of_replica(emulated: Cluster, name: str) -> tuple[list[Any], dict[str, str]]:
    """A submitted 9-replica job whose pods are in the states kubetrain tells apart (as the kubelet writes them)."""
    emu = emulated.emu
    assert emu is not None
    emulated.backend().submit(from_dict(job_doc(name, replicas=9)), flavor="job")
    pods = controllers(emu, NS).create_pods("job", name)
    emu.set_pod_phase(NS, pods["worker-0"], "Running")
    emu.set_pod_phase(NS, pods["worker-1"], "Pending", reason="Unschedulable")
    emu.set_pod_phase(NS, pods["worker-2"], "Pending", reason="ImagePullBackOff", message="Back-off pulling image")
    emu.set_pod_phase(NS, pods["worker-3"], "Failed", exit_code=3, message="bad shape")
    emu.set_pod_phase(NS, pods["worker-4"], "Failed", exit_code=137, reason="OOMKilled")
    emu.set_pod_phase(NS, pods["worker-5"], "Running")
    emu.set_pod_phase(NS, pods["worker-5"], "Running", restart=True, exit_code=1)
    emu.set_pod_phase(NS, pods["worker-6"], "Succeeded", exit_code=0)
    emu.set_pod_phase(NS, pods["worker-7"], "Running", reason="CrashLoopBackOff", message="back-off restarting")
    # worker-8: created, not scheduled yet (Pending, no condition)
    return ordered(emu.objects("jobs", NS, label_selector=f"kubetrain.dev/job={name}")), pods


def test_status_diagnosis_and_describe_from_pod_essentials_are_those_from_whole_pods(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    workloads, _ = _job_with_every_kind_of_replica(emulated, "whole")
    whole = emu.objects("pods", NS)
    kept = [pod_essentials(p) for p in whole]
    flavor = flavor_of(workloads[0])
    roles = roles_of(flavor, workloads)

    def answers(pods: list[Any]) -> dict[str, Any]:
        status = job_status(workloads, pods, job_id="whole", namespace=NS, flavor=flavor)
        diagnoses = diagnose(None, status, workloads, pods, flavor=flavor)
        return Description.of(status, diagnoses, workloads, group_pods(pods, roles)).to_dict()

    from_whole, from_kept = answers(whole), answers(kept)
    assert from_kept == from_whole
    # The job's states are all there (the comparison is not of two empty answers).
    phases = {r["phase"] for r in from_whole["replicas"]}
    assert {"Running", "Pending", "Failed", "Succeeded"} <= phases
    assert {d["cause"] for d in from_whole["diagnosis"]} >= {"Unschedulable", "ImagePull"}
    # ... and what is kept is much less than the pod.
    assert len(repr(kept)) * 2 < len(repr(whole))


def test_the_pod_cache_answers_as_a_fresh_look_at_each_change(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    workloads, pods = _job_with_every_kind_of_replica(emulated, "cached")
    flavor = flavor_of(workloads[0])
    cache = PodCache()

    def both() -> tuple[dict[str, Any], dict[str, Any]]:
        now = [pod_essentials(p) for p in emu.objects("pods", NS)]
        fresh = job_status(workloads, now, job_id="cached", namespace=NS, flavor=flavor)
        # A look at the job deleted (a cancel marks its replicas) changes no later answer.
        cancelled = job_status(workloads, now, job_id="cached", namespace=NS, flavor=flavor, deleted=True,
                               cache=cache)
        assert {r.phase for r in cancelled.replicas} >= {ReplicaPhase.CANCELLED}
        grouped = group_pods(now, roles_of(flavor, workloads), cache)
        cached = job_status(workloads, now, job_id="cached", namespace=NS, flavor=flavor, grouped=grouped,
                            cache=cache)
        return fresh.to_dict(), cached.to_dict()

    fresh, cached = both()
    assert cached == fresh
    emu.set_pod_phase(NS, pods["worker-0"], "Failed", exit_code=2)
    emu.set_pod_phase(NS, pods["worker-1"], "Running")
    fresh, cached = both()
    assert cached == fresh
    assert [r["phase"] for r in cached["replicas"]][:2] == ["Failed", "Running"]
    # The replica's pod replaced by a new one (the Job controller's retry): the new pod is the replica.
    emu.delete("pods", pods["worker-3"], NS)
    [again] = emu.create_job_pods(NS, "cached-worker", indexes=[3])
    emu.set_pod_phase(NS, again["metadata"]["name"], "Running")
    fresh, cached = both()
    assert cached == fresh
    assert cached["replicas"][3]["phase"] == "Running"
    # A pod gone without a replacement: the cache finds it gone (its table holds one more pod than the look).
    emu.delete("pods", pods["worker-6"], NS)
    fresh, cached = both()
    assert cached == fresh and cached["replicas"][6]["reason"] == "NoPod"


def test_a_change_of_nothing_kubetrain_reads_wakes_no_reader(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    b.submit(from_dict(job_doc("quiet", replicas=2)), flavor="job")
    pods = controllers(emu, NS).create_pods("job", "quiet")
    emu.set_pod_phase(NS, pods["worker-0"], "Running")
    with JobWatch(b.kube, NS, "quiet", JOBS) as jw:
        assert jw.wait_synced(30)
        listed = {p["metadata"]["name"]: p for p in jw.pods.snapshot()}  # the list's pods: kept as essentials too
        assert listed == {name: pod_essentials(emu.get("pods", name, NS)) for name in pods.values()}
        seen = jw.version
        emu.patch_status("pods", pods["worker-0"], {"podIP": "10.9.9.9", "qosClass": "Guaranteed"})
        emu.set_pod_phase(NS, pods["worker-1"], "Running")  # read: wakes readers, after the one above
        deadline = time.monotonic() + 30
        while jw.pods.snapshot() and "Running" not in [
                (p["status"] or {}).get("phase") for p in jw.pods.snapshot()
                if p["metadata"]["name"] == pods["worker-1"]]:
            assert time.monotonic() < deadline, "the watch never saw worker-1 Running"
            jw.wait_change(jw.version, timeout=1)
        assert jw.version == seen + 1  # one wake-up: the IP change was no news
        kept = {p["metadata"]["name"]: p for p in jw.pods.snapshot()}
        assert "podIP" not in kept[pods["worker-0"]]["status"]
        assert kept[pods["worker-0"]] == pod_essentials(emu.get("pods", pods["worker-0"], NS))


def test_same_essentials_tells_a_read_change_from_an_unread_one(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    emulated.backend().submit(from_dict(job_doc("same", replicas=1)), flavor="job")
    [pod] = controllers(emu, NS).create_pods("job", "same").values()
    before = pod_essentials(emu.set_pod_phase(NS, pod, "Running"))
    unread = pod_essentials(emu.patch_status("pods", pod, {"podIP": "10.1.1.1"}))
    assert unread["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert same_essentials(before, unread)
    read = pod_essentials(emu.set_pod_phase(NS, pod, "Failed", exit_code=1))
    assert not same_essentials(unread, read)


def test_the_watch_state_is_worked_out_once_per_change_for_every_reader(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    b.submit(from_dict(job_doc("once", replicas=3)), flavor="job")
    pods = controllers(emu, NS).create_pods("job", "once")
    with JobWatch(b.kube, NS, "once", JOBS) as jw:
        assert jw.wait_synced(30)
        state = job_state(jw, "once")
        first, grouped, _ = state()
        again, grouped_again, _ = state()
        assert first is not None and again is not None
        assert grouped_again is grouped and again.replicas is first.replicas  # the same work, not redone
        again.reason = "changed by a reader"
        assert state()[0].reason != "changed by a reader"  # type: ignore[union-attr]  # each reader its copy
        seen = jw.version
        emu.set_pod_phase(NS, pods["worker-2"], "Running")
        while jw.wait_change(seen, timeout=30) == seen:
            pass
        latest, _, _ = state()
        assert latest is not None and latest.replicas is not first.replicas
        assert latest.replicas[2].phase is ReplicaPhase.RUNNING


@pytest.mark.slow
def test_a_failure_among_10000_replicas_is_reported(emulated: Cluster) -> None:
    """A follower attached to a running job of 10,000 replicas (one list of 10,000 pods, five log streams)
    reports the failure of the last replica, and its last lines, and the job's end."""
    emu = emulated.emu
    assert emu is not None
    replicas = 10_000
    b = emulated.backend(log_grace=0.5, flavor="job")
    b.submit(from_dict(job_doc("ten-k", replicas=replicas)))
    played = controllers(emu, NS)
    pods = played.create_pods("job", "ten-k")
    assert len(pods) == replicas
    for pod in pods.values():
        emu.set_pod_phase(NS, pod, "Running")
    events: list[str] = []
    result: list[Any] = []
    out = io.StringIO()
    sink = OutputSink(out=out, err=io.StringIO(), color=False)
    thread = threading.Thread(target=lambda: result.append(b.follow("ten-k", sink=sink, on_event=events.append)),
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while "job ten-k Running" not in events:
        assert time.monotonic() < deadline and thread.is_alive(), f"the follower did not start: {events}"
        time.sleep(0.01)
    last = f"worker-{replicas - 1}"
    emu.append_log(NS, pods[last], "Traceback (most recent call last):\nValueError: bad shape\n")
    emu.set_pod_phase(NS, pods[last], "Failed", exit_code=3, message="bad shape")
    while f"{last} failed: exit code 3" not in events:
        assert time.monotonic() < deadline, f"no report of {last}'s failure: {events[-5:]}"
        time.sleep(0.01)
    # The Job controller's verdict (its 9,999 running pods are left to the test's end: deleting them one by one is
    # the emulator's slow path, and no part of what is tested here).
    failed = [{"type": kind, "status": "True", "reason": "BackoffLimitExceeded", "message": "worker failed",
               "lastTransitionTime": now()} for kind in ("FailureTarget", "Failed")]
    emu.patch_status("jobs", "ten-k-worker", {"conditions": failed}, NS)
    thread.join(120)
    [status] = result
    assert status.phase is JobPhase.FAILED
    assert status.first_failure is not None and status.first_failure.replica == last
    assert f"[{last}] ValueError: bad shape" in out.getvalue()  # a replica not followed: its last lines shown


def _evicted(name: str, scheduled: str, ready_lost: str) -> dict[str, Any]:
    """A pod as the kubelet leaves one it evicted (Failed, no container terminated: its end is dated by its latest
    condition), written as the API serves it."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "7",
                     "labels": {"kubetrain.dev/job": "ev", "kubetrain.dev/role": "worker",
                                "batch.kubernetes.io/job-completion-index": name[-1]}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "env": [{"name": "A", "value": "1"}]}],
                 "nodeName": "node-1"},
        "status": {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory.",
                   "startTime": scheduled,
                   "conditions": [
                       {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
                       {"type": "Initialized", "status": "True", "lastTransitionTime": scheduled},
                       {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                        "lastTransitionTime": ready_lost},
                       {"type": "Ready", "status": "False", "reason": "PodFailed", "lastTransitionTime": ready_lost},
                   ],
                   "containerStatuses": [{"name": "main", "state": {}, "lastState": {}, "restartCount": 0,
                                          "ready": False, "started": False, "image": "busybox:1.36",
                                          "containerID": "containerd://abc"}]},
    }


def test_essentials_keep_the_conditions_kubetrain_reads_and_hold_what_pods_share_once() -> None:
    a = pod_essentials(_evicted("ev-worker-0", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z"))
    b = pod_essentials(_evicted("ev-worker-1", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z"))
    c = pod_essentials(_evicted("ev-worker-2", "2026-11-27T10:00:00Z", "2026-11-27T10:07:00Z"))
    # Kept: the condition that does not hold, and the latest that does (the eviction's time dates the failure).
    assert [(x["type"], x["status"]) for x in a["status"]["conditions"]] == [
        ("DisruptionTarget", "True"), ("Ready", "False")]
    from kubetrain.backends.kubernetes.status_map import replica_from_pod

    for kept, whole in ((a, _evicted("ev-worker-0", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z")),
                        (c, _evicted("ev-worker-2", "2026-11-27T10:00:00Z", "2026-11-27T10:07:00Z"))):
        assert replica_from_pod("worker", 0, kept) == replica_from_pod("worker", 0, whole)
    # Pods alike hold one status and one spec; a pod that differs holds its own, and each pod its own name.
    assert a["status"] is b["status"] and a["spec"] is b["spec"]
    assert c["status"] is not a["status"] and c["status"] != a["status"]
    assert a["metadata"]["name"] == "ev-worker-0" and b["metadata"]["name"] == "ev-worker-1"


def _made_by_essentials(snapshot: Any) -> int:
    """Bytes alive that `pod_essentials` allocated (the emulator's threads allocate meanwhile: not counted), in
    blocks of a pod's size: the table of interned strings grows by doubling (a block of MBs, now and then, shared
    by every string interned: no pod's)."""
    import tracemalloc

    from kubetrain.backends.kubernetes import essentials

    traces = snapshot.filter_traces([tracemalloc.Filter(True, essentials.__file__)]).traces
    return sum(t.size for t in traces if t.size < 4096)


def test_a_kept_pod_weighs_little_beyond_its_own_name_uid_and_version(emulated: Cluster) -> None:
    """What a follower holds per replica is what decides its memory at 10,000 replicas: the pods of a running job,
    kept, weigh (beyond the strings only each pod has, read from the API) under 120 bytes each: one small object,
    what it holds alike with the other pods of its role (labels but its index, owner, spec, status) held once."""
    import gc
    import json
    import tracemalloc

    emu = emulated.emu
    assert emu is not None
    replicas = 400
    emulated.backend().submit(from_dict(job_doc("weigh", replicas=replicas)), flavor="job")
    for pod in controllers(emu, NS).create_pods("job", "weigh").values():
        emu.set_pod_phase(NS, pod, "Running")
    # As read from the API: every pod its own strings (the emulator's are shared with its store).
    whole = [json.loads(json.dumps(p)) for p in emu.objects("pods", NS)]
    pod_essentials(whole[0])  # what every kept pod shares (its status, its spec) is made before the count
    gc.collect()
    tracemalloc.start()
    try:
        kept = [pod_essentials(p) for p in whole]
        gc.collect()
        weight = _made_by_essentials(tracemalloc.take_snapshot()) / replicas
    finally:
        tracemalloc.stop()
    assert len(kept) == replicas and kept[1] == pod_essentials(whole[1])
    # Read as the pod it came from: its metadata (every label, its own index included) and plain JSON parts.
    assert kept[1]["metadata"]["labels"] == whole[1]["metadata"]["labels"]
    assert kept[1]["metadata"]["name"] == whole[1]["metadata"]["name"] and kept[1]["kind"] == "Pod"
    assert json.loads(json.dumps(dict(kept[1]))) == kept[1]
    assert weight < 120, f"a kept pod weighs {weight:.0f} bytes"  # 431 as dicts; 80 as a KeptPod


def test_a_new_version_of_a_kept_pod_shares_what_did_not_change_with_the_one_held(emulated: Cluster) -> None:
    """Readers hold the version of each pod they last looked at until their next look: while a big job's pods
    change, two versions of each are held, and the second costs little more than what changed."""
    import gc
    import json
    import tracemalloc

    emu = emulated.emu
    assert emu is not None
    replicas = 400
    emulated.backend().submit(from_dict(job_doc("twice", replicas=replicas)), flavor="job")
    pods = controllers(emu, NS).create_pods("job", "twice")
    held = {p["metadata"]["name"]: pod_essentials(json.loads(json.dumps(p))) for p in emu.objects("pods", NS)}
    for pod in pods.values():
        emu.set_pod_phase(NS, pod, "Running")
    # As read from the API: every pod its own strings (the emulator's are shared with its store).
    changed = [json.loads(json.dumps(p)) for p in emu.objects("pods", NS)]
    pod_essentials(changed[0])  # what every kept pod shares (its status, its spec) is made before the count
    gc.collect()
    tracemalloc.start()
    try:
        kept = [pod_essentials(p, held[p["metadata"]["name"]]) for p in changed]
        gc.collect()
        weight = _made_by_essentials(tracemalloc.take_snapshot()) / replicas
    finally:
        tracemalloc.stop()
    for new, whole in zip(kept, changed, strict=True):
        assert new == pod_essentials(whole)  # the same as without the version before
        assert new["status"]["phase"] == "Running" and held[new["metadata"]["name"]]["status"]["phase"] == "Pending"
    assert weight < 120, f"a pod's second version weighs {weight:.0f} bytes"  # 270 as dicts


def test_a_look_at_a_big_job_holds_little_per_replica(emulated: Cluster) -> None:
    """What a look keeps for the next (each pod's place, each replica's status) is held for every replica of a
    job: a few hundred bytes each, one tuple a pod."""
    import gc
    import tracemalloc

    from kubetrain.backends.kubernetes import status_map

    emu = emulated.emu
    assert emu is not None
    replicas = 2000
    emulated.backend().submit(from_dict(job_doc("looked", replicas=replicas)), flavor="job")
    for pod in controllers(emu, NS).create_pods("job", "looked").values():
        emu.set_pod_phase(NS, pod, "Running")
    workloads = ordered(emu.objects("jobs", NS, label_selector="kubetrain.dev/job=looked"))
    flavor = flavor_of(workloads[0])
    kept = [pod_essentials(p) for p in emu.objects("pods", NS)]
    cache = PodCache()
    gc.collect()
    tracemalloc.start()
    try:
        status = job_status(workloads, kept, job_id="looked", namespace=NS, flavor=flavor, cache=cache)
        del status  # what the cache holds, not the answer
        gc.collect()
        mine = [tracemalloc.Filter(True, status_map.__file__), tracemalloc.Filter(True, "*/kubetrain/status.py")]
        held = sum(t.size for t in tracemalloc.take_snapshot().filter_traces(mine).traces if t.size < 4096)
    finally:
        tracemalloc.stop()
    again = job_status(workloads, kept, job_id="looked", namespace=NS, flavor=flavor, cache=cache)
    assert again.to_dict() == job_status(workloads, kept, job_id="looked", namespace=NS, flavor=flavor).to_dict()
    assert {r.phase for r in again.replicas} == {ReplicaPhase.RUNNING}
    assert held / replicas < 325, f"{held / replicas:.0f} bytes a replica"


def test_of_a_pods_annotations_only_an_index_no_label_gives_is_kept() -> None:
    """The Job controller writes a pod's completion index as a label and as an annotation: one is kept (a dict
    a pod less); an index only an annotation gives (a controller that labels nothing) is kept, and read."""
    from kubetrain.backends.kubernetes.status_map import pod_index

    index = "batch.kubernetes.io/job-completion-index"
    both = _evicted("ev-worker-7", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z")
    both["metadata"]["labels"] = {"kubetrain.dev/job": "ev", index: "7"}
    both["metadata"]["annotations"] = {index: "7", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
    kept = pod_essentials(both)
    assert "annotations" not in kept["metadata"] and pod_index(kept) == pod_index(both) == 7
    alone = _evicted("ev-x", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z")
    alone["metadata"]["labels"] = {"kubetrain.dev/job": "ev"}
    alone["metadata"]["annotations"] = {"volcano.sh/task-index": "3", "scheduling.k8s.io/group-name": "ev-pg"}
    kept = pod_essentials(alone)
    assert kept["metadata"]["annotations"] == {"volcano.sh/task-index": "3"} and pod_index(kept) == 3


def test_a_pods_own_values_do_not_grow_the_interpreters_table_of_interned_strings() -> None:
    """Values many pods share are held once; one pod's (its replica index) are not put in the interpreter's table
    of interned strings, which never shrinks (at 10,000 pods it doubled: a block of 2 MB)."""
    import sys

    index = "batch.kubernetes.io/job-completion-index"
    pods = []
    for i in (9101, 9102):
        pod = _evicted(f"ev-worker-{i}", "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z")
        pod["metadata"]["labels"] = {"kubetrain.dev/job": "ev-interned", index: "".join(["91", str(i)[2:]])}
        pods.append(pod_essentials(pod))
    a, b = (p["metadata"]["labels"] for p in pods)
    assert a["kubetrain.dev/job"] is b["kubetrain.dev/job"]  # shared
    assert sys.intern("".join(["91", "01"])) is not a[index]  # not interned: the interpreter's table has no copy


def test_a_look_after_every_pod_started_works_out_no_place_again(emulated: Cluster) -> None:
    """A big job starting changes every pod (Pending, then Running) while its labels stay: the watch keeps the new
    versions sharing the old ones' labels, and the next look keeps each pod's place (its replica) rather than
    working it out again (a new (role, index) and index for each of 10,000 pods, 0.8 MB at once)."""
    import gc
    import json
    import tracemalloc

    from kubetrain.backends.kubernetes import status_map

    emu = emulated.emu
    assert emu is not None
    replicas = 400
    emulated.backend().submit(from_dict(job_doc("placed", replicas=replicas)), flavor="job")
    pods = controllers(emu, NS).create_pods("job", "placed")
    workloads = ordered(emu.objects("jobs", NS, label_selector="kubetrain.dev/job=placed"))
    flavor = flavor_of(workloads[0])
    roles = roles_of(flavor, workloads)
    held = {p["metadata"]["name"]: pod_essentials(json.loads(json.dumps(p))) for p in emu.objects("pods", NS)}
    cache = PodCache()
    before = group_pods(list(held.values()), roles, cache)
    for pod in pods.values():
        emu.set_pod_phase(NS, pod, "Running")
    started = [pod_essentials(json.loads(json.dumps(p)), held[p["metadata"]["name"]]) for p in emu.objects("pods", NS)]
    gc.collect()
    tracemalloc.start()
    try:
        after = group_pods(started, roles, cache)
        places = sum(t.size for t in tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, status_map.__file__)]).traces if t.size < 4096)
    finally:
        tracemalloc.stop()
    fresh = group_pods(started, roles)
    assert after.current == fresh.current and after.earlier == fresh.earlier
    assert set(after.current) == set(before.current) and len(after.current) == replicas
    assert all(after.current[key]["status"]["phase"] == "Running" for key in after.current)
    assert places / replicas < 40, f"{places / replicas:.0f} bytes a pod for places worked out again"


def test_replicas_started_in_the_same_second_share_their_start_time(emulated: Cluster) -> None:
    """A look keeps every replica's status: replicas that started in the same second (most of a big job's) hold
    one start time, not a float each."""
    import json

    emu = emulated.emu
    assert emu is not None
    emulated.backend().submit(from_dict(job_doc("sametime", replicas=50)), flavor="job")
    for pod in controllers(emu, NS).create_pods("job", "sametime").values():
        emu.set_pod_phase(NS, pod, "Running")
    workloads = ordered(emu.objects("jobs", NS, label_selector="kubetrain.dev/job=sametime"))
    # As read from the API: every pod its own strings.
    kept = [pod_essentials(json.loads(json.dumps(p))) for p in emu.objects("pods", NS)]
    status = job_status(workloads, kept, job_id="sametime", namespace=NS, flavor=flavor_of(workloads[0]),
                        cache=PodCache())
    by_text: dict[str, list[Any]] = {}
    index = "batch.kubernetes.io/job-completion-index"
    by_index = sorted(kept, key=lambda p: int(p["metadata"]["labels"][index]))
    for pod, replica in zip(by_index, status.replicas, strict=True):
        assert replica.started_at == parse_time(pod["status"]["startTime"])
        by_text.setdefault(pod["status"]["startTime"], []).append(replica.started_at)
    assert any(len(times) > 1 for times in by_text.values())  # the test's premise: a second shared by several
    for times in by_text.values():
        assert all(t is times[0] for t in times)


class _ClearedBeforeEachRead(dict[str, Any]):
    """The shared start times as another thread's look leaves them: emptied (the table is bounded) between a
    look's check and its read."""

    def __getitem__(self, key: str) -> Any:
        self.clear()
        return super().__getitem__(key)


def test_a_start_time_is_read_while_another_look_empties_the_shared_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Statuses are worked out on several threads (the web view beside a follower): a table emptied meanwhile
    must not end a look with a KeyError."""
    from kubetrain.backends.kubernetes import status_map

    monkeypatch.setattr(status_map, "_TIMES", _ClearedBeforeEachRead())
    text = "2026-11-27T10:00:00Z"
    assert status_map._shared_time(text) == parse_time(text)
    assert status_map._shared_time(text) == parse_time(text)


def _jobset_pod(job_index: int, completion: int, version: str = "1", *, phase: str = "Running",
                **extra_labels: str) -> dict[str, Any]:
    """A pod of a JobSet's replicatedJob "w" (two Jobs of two completions each), as its controllers label it."""
    name = f"js-w-{job_index}-{completion}"
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": "w", "jobset.sigs.k8s.io/job-index": str(job_index),
              "batch.kubernetes.io/job-completion-index": str(completion), **extra_labels}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": version,
                         "labels": labels, "creationTimestamp": "2026-11-27T10:00:00Z"},
            "spec": {"containers": [{"name": "main"}], "nodeName": "node-1"},
            "status": {"phase": phase}}


def test_the_failed_replicas_pod_is_found_by_its_place_in_the_job_as_grouping_finds_it() -> None:
    """`replica_pod` (what `last_lines` reads the failure's lines from) finds the pod grouping would, without
    grouping every pod: a JobSet's pod stands at its Job's index times the Job's completions plus its own."""
    from kubetrain.backends.kubernetes.status_map import replica_pod

    roles = [RoleInfo(role="w", replicas=4, completions=2)]
    pods = [_jobset_pod(j, c) for j in (0, 1) for c in (0, 1)]
    kept = [pod_essentials(p) for p in pods]
    grouped = group_pods(pods, roles)
    for index in range(4):
        found = replica_pod(kept, "w", index, roles)
        assert found is not None and found["metadata"]["name"] == grouped.current[("w", index)]["metadata"]["name"]
    assert replica_pod(kept, "w", 3, roles)["metadata"]["name"] == "js-w-1-1"  # type: ignore[index]
    assert replica_pod(kept, "w", 9, roles) is None


def test_a_kept_pods_labels_are_its_own_to_read() -> None:
    """The labels pods have alike are held once for all of them; a reader changing the labels it was handed
    changes no other pod."""
    a, b = (pod_essentials(_jobset_pod(0, c)) for c in (0, 1))
    assert a.labels is b.labels  # held once
    handed = a["metadata"]["labels"]
    handed["jobset.sigs.k8s.io/replicatedjob-name"] = "changed"
    assert b["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "w"
    assert a["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "w"


def test_the_pod_cache_places_a_pod_again_when_the_keys_of_its_numbered_labels_change() -> None:
    """A new version of a pod whose numbered labels moved to other keys (same values) stands where a fresh look
    puts it, not where it stood."""
    roles = [RoleInfo(role="w", replicas=4, completions=2)]
    cache = PodCache()
    first = pod_essentials(_jobset_pod(1, 0))
    assert list(group_pods([first], roles, cache).current) == [("w", 2)]
    moved = _jobset_pod(1, 0, version="2")
    # Job 1 is now only another label's value (in the same place among the labels).
    moved["metadata"]["labels"] = {("other-index" if k == "jobset.sigs.k8s.io/job-index" else k): v
                                   for k, v in moved["metadata"]["labels"].items()}
    second = pod_essentials(moved, first)
    assert second.labels is first.labels and second.own == first.own  # what the cache once compared
    assert list(group_pods([second], roles, cache).current) == list(group_pods([second], roles).current) == [("w", 0)]
