"""MPI over ssh, run for real: the rendered launcher and worker pods of an MPI job, started the way a cluster
starts them (tests/support/pods.py: each pod's command and args with the kubelet's env, its volumes at their
mount paths, its user and capabilities), with Debian's OpenSSH server in the worker and Open MPI's mpirun in
the launcher reaching it with the job's key pair (made as `kubetrain run` makes it), and mpi4py's allreduce
across the ranks.

What stands in for a cluster is said in tests/support/pods.py (/etc/hosts for its DNS, a bridge for its pod
network, this machine's files for the image). Everything else is what the pods run: kubetrain's start-up
script, sshd with kubetrain's config in each worker pod, the launcher's wait for its workers, mpirun with the
environment it forwards, ranks talking over the pods' network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.kubernetes.ssh_keys import fill_ssh_secrets
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, pod_templates
from tests.support.pods import TEST_USER, ClusterPlan, PodPlan, pod_plan, run_cluster

ENGINE_INDEX = {"job": ("JOB_COMPLETION_INDEX",), "jobset": ("JOB_COMPLETION_INDEX",),
                "volcano": ("VK_TASK_INDEX", "VC_TASK_INDEX")}

RANKS = """\
import json, os, socket, sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank(), op=MPI.SUM)
seen = {name: os.environ.get(name) for name in ("KUBETRAIN_JOB", "KUBETRAIN_ROLE", "FOO", "SSH_CONNECTION")}
sys.stdout.write(json.dumps({"rank": comm.Get_rank(), "size": comm.Get_size(), "sum": total, "uid": os.getuid(),
                             "host": socket.gethostname(), "env": seen}) + "\\n")
sys.stdout.flush()
"""


PYTHON = "/usr/bin/python3"
"""The "image's" python, with Debian's mpi4py: any user can run it (a virtual environment may live in a folder
only its owner can read)."""


def _requirements() -> None:
    if os.geteuid() != 0:  # a failure, not a skip: a run that cannot check MPI over ssh must not pass
        pytest.fail("runs pods in namespaces of their own (unshare, mounts): needs root, as the test command "
                    "(scripts/test.sh, CI) has")
    missing = [tool for tool in ("mpirun", "ssh", "unshare", "setpriv", "ip") if shutil.which(tool) is None]
    missing += [path for path in ("/usr/sbin/sshd", PYTHON) if not Path(path).exists()]
    if not missing and subprocess.run([PYTHON, "-c", "import mpi4py"], capture_output=True).returncode != 0:
        missing.append("mpi4py for /usr/bin/python3")
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: scripts/test.sh installs openmpi-bin, openssh-server and "
                    "python3-mpi4py")


def mpi_job(**spec: Any) -> Any:
    env = {"FOO": "from-the-job", **spec.pop("env", {})}
    return make_job({"framework": "mpi", "replicas": 2, "run": {"exec": [PYTHON, "-c", RANKS]}, "env": env, **spec},
                    "demo", image=IMAGE)


def cluster_plan(job: Any, flavor: str, tmp_path: Path, *, launcher_first: bool = False,
                 worker_keys_of_another_job: bool = False) -> tuple[ClusterPlan, dict[str, str]]:
    rendered = render_manifests(job, flavor)
    assert rendered.topology is not None
    objects = fill_ssh_secrets(rendered.objects)  # as `kubetrain run` submits them
    templates = pod_templates(objects)
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a Debian image's
    hosts: dict[str, str] = {}
    for role, n in rendered.topology.roles.items():
        for i in range(n):
            last = 10 + i if role == "launcher" else 20 + i
            hosts[rendered.topology.host(role, i)] = f"10.233.0.{last}"  # the pods' bridge network
    engine_names = ENGINE_INDEX[flavor]

    def pod(role: str, i: int, objects: list[dict[str, Any]]) -> PodPlan:
        host = rendered.topology.host(role, i)
        return pod_plan(objects, templates[role], name=f"{role}-{i}", hostname=host.split(".")[0], address=hosts[host],
                        engine=dict.fromkeys(engine_names, str(i)), into=tmp_path / f"{role}-{i}", path=path)

    launcher = pod("launcher", 0, objects)
    worker_objects = fill_ssh_secrets(rendered.objects) if worker_keys_of_another_job else objects
    workers = [pod("worker", i, worker_objects) for i in range(rendered.topology.roles["worker"])]
    names = [w.name for w in workers]
    order = ["launcher-0", *names] if launcher_first else [*names, "launcher-0"]
    first_worker = rendered.topology.host("worker", 0)
    wait_for = {name: ["launcher-0", f"waiting for {first_worker}"] for name in names} if launcher_first else {}
    plan = ClusterPlan([launcher, *workers], hosts, order, "launcher-0", str(tmp_path), wait_for, timeout=90.0)
    return plan, hosts


def ranks_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    launcher = result["launcher-0"]
    assert launcher["code"] == 0, f"launcher: {launcher}\nworkers: {result}"
    return sorted((json.loads(line) for line in launcher["stdout"].splitlines() if line.startswith("{")),
                  key=lambda r: r["rank"])


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_the_launcher_reaches_its_workers_over_ssh_as_root(flavor: str, tmp_path: Path) -> None:
    """Root pods: the worker's sshd runs with the three capabilities kubetrain adds (and no other), the launcher
    started first waits for it, mpirun starts a rank through each worker name, and every rank sees the
    launcher's environment, as a local rank does."""
    _requirements()
    job = mpi_job()
    plan, hosts = cluster_plan(job, flavor, tmp_path, launcher_first=True)
    assert [p.capabilities for p in plan.pods[1:]] == [["SETUID", "SETGID", "SYS_CHROOT"]] * 2
    result = run_cluster(plan)
    assert "waiting for" in result["launcher-0"]["stderr"]  # it started before its workers and waited
    ranks = ranks_of(result)
    assert [(r["rank"], r["size"], r["sum"]) for r in ranks] == [(0, 2, 1), (1, 2, 1)]
    assert {r["uid"] for r in ranks} == {0}
    assert all(r["env"]["KUBETRAIN_JOB"] == "demo" and r["env"]["FOO"] == "from-the-job" for r in ranks)
    assert all(r["env"]["KUBETRAIN_ROLE"] == "launcher" for r in ranks)  # the launcher's, as locally
    # Each rank was started over ssh in its own worker pod (rank i on worker i: slots=1 each), from the launcher.
    for rank, worker in zip(ranks, sorted(h for h in hosts if "worker" in h), strict=True):
        client, _, server, port = rank["env"]["SSH_CONNECTION"].split()
        assert (client, server, port) == (hosts[launcher_host(hosts)], hosts[worker], "2222")
        assert rank["host"] == worker.split(".")[0]
    assert all("Accepted publickey" in result[f"worker-{i}"]["stderr"] for i in range(2))


def launcher_host(hosts: dict[str, str]) -> str:
    return next(h for h in hosts if "launcher" in h)


def test_a_non_root_pod_runs_sshd_with_every_capability_dropped(tmp_path: Path) -> None:
    """security.runAsUid: the pods run as a user of the image, kubetrain adds no capability, and sshd and mpirun
    work all the same (the key is copied to a file of that user's own, which OpenSSH requires)."""
    _requirements()
    user, uid = TEST_USER
    job = mpi_job(security={"runAsUid": uid, "runAsGid": uid})
    plan, _ = cluster_plan(job, "job", tmp_path)
    assert [p.capabilities for p in plan.pods] == [[], [], []] and {p.uid for p in plan.pods} == {uid}
    ranks = ranks_of(run_cluster(plan))
    assert [(r["sum"], r["uid"]) for r in ranks] == [(1, uid), (1, uid)], user


def test_a_worker_with_another_key_is_refused_and_named(tmp_path: Path) -> None:
    """The launcher checks each worker's host key against the job's own (never trusts a host it does not know):
    a worker holding another job's key pair does not get a rank, and the launcher says which worker and why."""
    _requirements()
    job = mpi_job(env={"KUBETRAIN_SSH_WAIT": "2"})
    plan, hosts = cluster_plan(job, "job", tmp_path, worker_keys_of_another_job=True)
    result = run_cluster(plan)
    launcher = result["launcher-0"]
    first = next(h for h in hosts if "worker-0" in h)
    assert launcher["code"] == 1, launcher
    assert f"kubetrain: {first} does not answer over ssh after 2 tries" in launcher["stderr"]
    assert "Host key verification failed" in launcher["stderr"]
    assert "allreduce" not in launcher["stdout"] and not launcher["stdout"].strip()


def test_the_program_is_what_the_rendered_launcher_runs(tmp_path: Path) -> None:
    """The pods run the rendered command and args, not a copy of them (a guard on the harness itself)."""
    job = mpi_job()
    plan, _ = cluster_plan(job, "job", tmp_path)
    launcher, worker, _ = plan.pods
    assert launcher.argv[:2] == ["/bin/sh", "-c"] and "mpirun" in launcher.argv and RANKS in launcher.argv
    assert worker.argv[-4:] == ["/usr/sbin/sshd", "-De", "-f", "/etc/kubetrain/sshd_config"]
    assert set(launcher.etc) == {"/etc/kubetrain", "/etc/kubetrain-ssh"} and launcher.empty_dirs == [
        "/var/run/kubetrain-ssh"]
    keys = Path(launcher.etc["/etc/kubetrain-ssh"])
    assert (keys / "ssh-privatekey").stat().st_mode & 0o777 == 0o444  # the Secret volume's defaultMode
    assert textwrap.dedent((keys / "known_hosts").read_text()).startswith("* ssh-ed25519 ")
