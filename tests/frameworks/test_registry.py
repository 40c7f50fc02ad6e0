"""The framework registry is the one place a framework is known: every framework of the job model has its
record and its wiring, every one plans a job the way its contract says, and no other code asks which framework
it is or keeps a table of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubetrain.contract import env_names
from kubetrain.contract.frameworks import RECORDS, record_of
from kubetrain.frameworks import WIRING
from kubetrain.jobspec import Framework
from kubetrain.jobspec.frameworks import ROLES
from kubetrain.plan import plan, replica_counts
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE

ROOT = Path(__file__).resolve().parents[2] / "kubetrain"

# What each framework's replicas must find in their env (the contract of docs/design.md).
CONTRACT = {
    Framework.PYTORCH: {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
    Framework.DEEPSPEED: {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", env_names.HOSTFILE},
    Framework.TENSORFLOW: {"TF_CONFIG"},
    Framework.JAX: {"JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"},
    Framework.MPI: {env_names.HOSTFILE},
    Framework.GENERIC: set(),
}


def test_every_framework_of_the_model_is_registered_once() -> None:
    assert set(RECORDS) == set(Framework) == set(CONTRACT) == set(WIRING)
    assert all(record.name is name for name, record in RECORDS.items())
    assert record_of("pytorch") is RECORDS[Framework.PYTORCH]


@pytest.mark.parametrize("framework", list(RECORDS))
def test_every_framework_plans_its_contract(framework: Framework) -> None:
    roles = ROLES[framework]
    spec: dict[str, object] = {"framework": framework.value, "run": {"python": ["train.py"]}}
    if framework is Framework.MPI:
        spec["roles"] = {"worker": {"replicas": 2}}
    else:
        spec["replicas"] = 2
    job = make_job(spec, image=IMAGE)
    the_plan = plan(job)
    counts = replica_counts(job.spec)
    record = RECORDS[framework]
    assert list(counts)[: len(record.implied_roles)] == list(record.implied_roles)
    assert roles is None or set(counts) <= set(roles)
    running = [p for r in the_plan.replicas for p in r.processes]
    assert running, framework
    for process in running:
        assert process.env[env_names.FRAMEWORK] == framework.value
        assert CONTRACT[framework] <= set(process.env), (framework, sorted(process.env))


def test_no_code_outside_the_registries_compares_framework_names() -> None:
    """What differs by framework is a field of its record (contract/frameworks.py), the resolver's too: inside a
    replica it reads TensorFlow's cluster layout from the record KUBETRAIN_FRAMEWORK names (`cluster_roles`)."""
    names = "|".join(f.value for f in Framework)
    compare = re.compile(rf'[=!]=\s*"({names})"|"({names})"\s*[=!]=|\bin\s*[(\[{{]\s*"({names})"'
                         rf"|\bis (not )?Framework\.|[=!]= Framework\.")
    own = {ROOT / "frameworks" / f"{f.value}.py" for f in Framework} | {ROOT / "contract" / "frameworks.py"}
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(ROOT.rglob("*.py")) if p not in own
             for n, line in enumerate(p.read_text().splitlines(), 1) if compare.search(line)]
    assert found == []


def test_no_module_but_the_records_keeps_a_table_of_frameworks() -> None:
    """A framework's facts are its record (contract/frameworks.py), read from there: no other module keys a table
    by framework names or lists them, so adding a framework is its record and its wiring module. Volcano's
    plugins and the launchers' programs share some names with frameworks (the `pytorch` plugin, the `deepspeed`
    program): those are the names of Volcano's plugins and of programs, not kubetrain's frameworks."""
    names = "|".join(f.value for f in Framework)
    table = re.compile(rf'"({names})"\s*:\s*[^\s]|Framework\.[A-Z]+\s*:|"({names})",\s*"({names})"')
    allowed = {"contract/frameworks.py", "foreign/volcano.py", "frameworks/controllers/volcano.py",
               "frameworks/launchers.py"}
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(ROOT.rglob("*.py")) if str(p.relative_to(ROOT)) not in allowed
             for n, line in enumerate(p.read_text().splitlines(), 1) if table.search(line)]
    assert found == []
