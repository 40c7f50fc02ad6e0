"""Each controller's contract (kubetrain/frameworks/controllers, the tables of docs/foreign.md) holds, row by
row: its sample document is converted and run locally as real processes — each replica's program replaced
by one that reports what it sees (its env, the controller's files, the downward-API fields) — and rendered
for a flavor without that controller, each container run as the kubelet would (tests/support/kubelet.py).
Every row's example must be what the replica sees, and every variable a replica sees from the controller must
be a row of the table: nothing given without a word, nothing in the table not given.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import kubetrain
from kubetrain.backends.kubernetes.manifests.volumes import path_key
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.frameworks import record_of
from kubetrain.foreign import convert
from kubetrain.frameworks import Topology
from kubetrain.frameworks.common import program_argv
from kubetrain.frameworks.controllers import CONTRACTS, Contract, Row
from kubetrain.frameworks.controllers.table import BEGIN, END, markdown
from kubetrain.frameworks.launchers import run_launcher
from kubetrain.jobspec import TrainJob, from_dict
from kubetrain.jobspec.controller import CONTROLLER_KINDS
from kubetrain.plan import plan
from kubetrain.status import JobPhase
from tests.support.helpers import ROOT, log_lines, no_process_left_behind  # noqa: F401 (fixture)
from tests.support.kubelet import kubelet_env, main_container, mounted_volumes, pod_templates, run_container

DOCS = ROOT / "docs" / "foreign.md"
CASES = [(contract, sample) for contract in CONTRACTS.values() for sample in contract.samples]

REPORT = """\
#!/usr/bin/env python3
import json, os, sys
# What this process sees: its whole env, and the controller's files named in argv (without their leading /).
root = os.environ.get("KUBETRAIN_FILES_ROOT", "")
files = {}
for path in sys.argv[1:]:
    try:
        files["/" + path] = open(root + "/" + path).read()
    except OSError:
        files["/" + path] = None
# A line an item: an mpirun forwards its ranks' output in pieces, so one long line could be cut; and one rank
# of an mpirun's world reports (they share the launcher's environment), so their lines are not interleaved.
if os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
    sys.exit(0)
for name, value in os.environ.items():
    print("CONTRACT env " + json.dumps([name, value]), flush=True)
for path, text in files.items():
    print("CONTRACT file " + json.dumps([path, text]), flush=True)
"""

FIELD_VAR = "KT_FIELD_{}"
"""A variable the test adds to read a label or annotation row through the downward API."""


def case_id(case: tuple[Contract, str]) -> str:
    contract, sample = case
    return f"{contract.kind}-{contract.api_version}-{sample}"


def test_every_controller_kind_has_a_contract() -> None:
    assert set(CONTRACTS) == set(CONTROLLER_KINDS)


def test_the_docs_hold_the_generated_tables() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/foreign.md lost its contract tables' markers"
    shown = text[text.index(BEGIN): text.index(END) + len(END)]
    assert shown == markdown(), "regenerate: python -m kubetrain.frameworks.controllers (between the markers)"


def rows_of(contract: Contract, sample: str, what: str) -> list[Row]:
    return [r for r in contract.rows if r.sample == sample and r.what == what]


def converted(contract: Contract, sample: str) -> TrainJob:
    conversion = convert(copy.deepcopy(dict(contract.samples[sample])))
    assert conversion.job.spec.controller is not None
    assert (conversion.job.spec.controller.api_version, conversion.job.spec.controller.kind) == contract.key
    return conversion.job


def reporting(job: TrainJob, contract: Contract, sample: str) -> TrainJob:
    """`job` with every role's program the report, and a variable per label or annotation row reading it
    through the downward API."""
    data = job.to_dict()
    spec = data["spec"]
    files = [r.checked_name.lstrip("/") for r in rows_of(contract, sample, "file")]
    # A launcher the controller runs as written stays one (a stand-in named like it), so what the container
    # gets is the launcher's, not kubetrain's refusal of a plain program beside nprocPerNode.
    launcher = any(run_launcher(r.settings.run) for r in plan(job).replicas)
    run: dict[str, Any] = {"exec": ["./torchrun", *files]} if launcher else {"python": ["report.py", *files]}
    fields = [{"name": FIELD_VAR.format(i), "valueFrom": {"fieldRef": {"fieldPath": _field(r)}}}
              for i, r in enumerate(contract.rows) if r.sample == sample and r.what in ("label", "annotation")]
    spec["run"] = run
    spec["env"] = [*(spec.get("env") or []), *fields]
    # Every replica reports before the job ends: which roles end it (a TFJob's chief) is not the table's matter.
    (spec.get("runPolicy") or {}).pop("successRoles", None)
    for role in (spec.get("roles") or {}).values():
        if "run" in role:
            role["run"] = run
    return from_dict(data)


def _field(row: Row) -> str:
    kind = "labels" if row.what == "label" else "annotations"
    return f"metadata.{kind}['{row.checked_name}']"


def expand(text: str, topology: Topology, root: str) -> str:
    def one(m: re.Match[str]) -> str:
        what, key = m.group(1), m.group(2)
        role, _, index = key.rpartition("-")
        host, port = topology.host(role, int(index)), topology.port(role, int(index))
        return {"host": host, "port": str(port), "addr": f"{host}:{port}"}[what]

    return re.sub(r"\{(host|port|addr):([a-z0-9-]+)\}", one, text).replace("{root}", root)


def expected(row: Row, key: str, topology: Topology, root: str) -> tuple[bool, str | None]:
    """(whether the row says something of process `key` — `worker-1`, `worker-1.0` —, what it says)."""
    replica = key.split(".")[0]
    for name in (key, replica, "*"):
        if name in row.example:
            value = row.example[name]
            return True, None if value is None else expand(value, topology, root)
    return False, None


def documented(contract: Contract, sample: str, name: str) -> bool:
    for row in contract.rows:
        if row.what != "env":
            continue
        for one in row.name.split(", "):
            pattern = re.escape(one).replace(re.escape("<TASK>"), "[A-Z0-9_]+")
            if re.fullmatch(pattern, name):
                return True
    return False


def topology_of(cluster: dict[str, list[str]]) -> Topology:
    """The local topology a replica's KUBETRAIN_CLUSTER describes (every replica's host:port)."""
    ports = {(role, i): int(address.rpartition(":")[2]) for role, addresses in cluster.items()
             for i, address in enumerate(addresses)}
    return Topology({role: len(a) for role, a in cluster.items()}, host_pattern="127.0.0.1", ports=ports)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_table_holds_for_a_locally_run_replica(case: tuple[Contract, str], tmp_path: Path) -> None:
    contract, sample = case
    job = converted(contract, sample)
    machine = set(os.environ)
    for name in ("report.py", "torchrun"):
        (tmp_path / name).write_text(REPORT)
        (tmp_path / name).chmod(0o755)
    ours = reporting(job, contract, sample)
    result = kubetrain.run(ours, base_dir=str(tmp_path))
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED, result.status
    seen: dict[str, dict[str, Any]] = {}
    for key, lines in log_lines(result.status.job_id).items():  # by process: `worker-1`, `worker-1.0`
        for line in lines:
            if line.startswith("CONTRACT "):
                _, what, item = line.split(" ", 2)
                name, value = json.loads(item)
                seen.setdefault(key, {"env": {}, "files": {}})["env" if what == "env" else "files"][name] = value
    assert seen, "no replica reported"
    any_env = next(iter(seen.values()))["env"]
    topology = topology_of(json.loads(any_env["KUBETRAIN_CLUSTER"]))
    root = any_env.get("KUBETRAIN_FILES_ROOT", "")
    hosting = {r.key for r in plan(job).replicas if not r.processes}
    checked = 0
    for i, row in enumerate(contract.rows):
        if row.sample != sample or not row.example or row.what in ("host", "command") or row.cluster_only:
            continue
        for key, report in seen.items():
            says, value = expected(row, key, topology, root)
            if not says:
                continue
            if row.what == "env":
                got = report["env"].get(row.checked_name)
            elif row.what == "file":
                got = report["files"].get(row.checked_name)
            else:
                got = report["env"].get(FIELD_VAR.format(i)) or None
            assert got == value, f"{contract.kind} {row.what} {row.checked_name} in {key}"
            checked += 1
        for key in row.example:
            if key != "*":
                assert key in seen or key.split(".")[0] in hosting, f"no replica {key} ran ({row.name})"
    # Nothing given without a row: every variable of the controller a replica sees is in its table. Under a
    # framework whose launcher kubetrain starts (MPI's mpirun), that launcher's variables and those its ranks
    # get from the mpirun itself are not the controller's: only the contract's own are held to the table.
    framework = framework_env(job)
    for key, report in seen.items():
        given = {name for name in report["env"] if name not in machine and name not in ("OMP_NUM_THREADS", "PATH")
                 and not name.startswith(("KUBETRAIN_", "KT_FIELD_"))}
        if framework is not None:
            role = key.split(".")[0].rpartition("-")[0]
            given = {name for name in given if name in contract_env(job, role) and name not in framework}
        for name in sorted(given):
            assert documented(contract, sample, name), f"{contract.kind}: {key} gets {name}, which no row names"
    # Every host row names a replica the controller makes resolvable; every command runs as written.
    names = plan(job).names
    for row in rows_of(contract, sample, "host"):
        for key, name in row.example.items():
            role, _, index = key.rpartition("-")
            assert names.get(str(name)) == (role, int(index)), (row.name, name)
            checked += 1
    for replica in plan(job).replicas:
        for process in replica.processes:
            run = replica.settings.run
            assert run is not None
            program = tuple(program_argv(run))
            if framework is None:
                assert process.argv == program, process.argv  # not wrapped
            else:
                # kubetrain's mpirun around the program, itself no launcher: one launcher, not two.
                assert process.argv[-len(program):] == program and run_launcher(run) is None, process.argv
    assert checked, f"no row of {contract.kind}'s {sample} sample was checked"


def framework_env(job: TrainJob) -> set[str] | None:
    """The variables of the job's framework, when its launcher is kubetrain's (MPI), else None."""
    if not record_of(job.spec.framework).ssh_launcher:
        return None
    own = plan(job.model_copy(update={"spec": job.spec.model_copy(update={"controller": None})}))
    return {name for wiring in own.roles for name in wiring.env}


def contract_env(job: TrainJob, role: str) -> set[str]:
    return {name for wiring in plan(job).roles if wiring.role == role for name in wiring.env}


WITHOUT = ("job", "jobset", "volcano")
"""The flavors a contract is rendered into when their engine is not its controller."""
RENDER_CASES = [(contract, sample, flavor) for contract, sample in CASES for flavor in WITHOUT
                if flavor != contract.native_flavor]
ENGINE_INDEX = {"job": ("JOB_COMPLETION_INDEX",), "jobset": ("JOB_COMPLETION_INDEX",),
                "volcano": ("VK_TASK_INDEX", "VC_TASK_INDEX")}


@pytest.mark.parametrize("case", RENDER_CASES, ids=[f"{case_id(c[:2])}-{c[2]}" for c in RENDER_CASES])
def test_the_table_holds_for_a_rendered_pod_without_the_controller(case: tuple[Contract, str, str],
                                                                    tmp_path: Path) -> None:
    """Rendered for a flavor whose engine is not the controller, each container run as the kubelet would: the
    env rows' values; the file rows' content mounted at their paths from the files ConfigMap."""
    contract, sample, flavor = case
    job = converted(contract, sample)
    rendered = render_manifests(job, flavor)
    topology = rendered.topology
    assert topology is not None
    templates = pod_templates(rendered.objects)
    data = next((o["data"] for o in rendered.objects if o["kind"] == "ConfigMap"), {})
    checked = 0
    for role, template in templates.items():
        container = main_container(template)
        if "command" not in container:
            continue  # an image run by its ENTRYPOINT: none of the samples
        mounts_of = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        # What the start-up script reads from its volumes (an MPI launcher's ssh key), and an `ssh` that answers
        # at once for its wait for the workers (tests/kubernetes/test_mpi_ssh.py runs the real one).
        mounts = mounted_volumes(rendered.objects, template, tmp_path / role)
        (tmp_path / "ssh").write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / "ssh").chmod(0o755)
        for index in range(topology.roles[role]):
            host = topology.host(role, index)
            fields = {"metadata.name": f"{rendered.name}-{role}-{index}", "status.podIP": host,
                      "status.hostIP": host}
            env = kubelet_env(container, fields, dict.fromkeys(ENGINE_INDEX[flavor], str(index)))
            code, seen, err = run_container(container, env, path_dir=tmp_path, mounts=mounts)
            assert code == 0 and seen is not None, err
            key = f"{role}-{index}"
            for row in contract.rows:
                if row.sample != sample or not row.example or row.local_only or any("." in k for k in row.example):
                    continue
                says, value = expected(row, key, topology, "")
                if not says:
                    continue
                if row.what == "env":
                    assert seen["env"].get(row.checked_name) == value, (contract.kind, row.checked_name, key)
                    checked += 1
                elif row.what == "file" and value is not None:
                    folder, _, name = row.checked_name.rpartition("/")
                    volume = volumes[mounts_of[folder]]["configMap"]
                    assert {"key": path_key(row.checked_name), "path": name} in [
                        {k: item[k] for k in ("key", "path")} for item in volume["items"]]
                    assert data[path_key(row.checked_name)] == value, (contract.kind, row.checked_name)
                    checked += 1
    if any(r.what == "env" and r.sample == sample and r.example and not any("." in k for k in r.example)
           for r in contract.rows):
        assert checked, f"no row of {contract.kind}'s {sample} sample was checked on a rendered pod"
