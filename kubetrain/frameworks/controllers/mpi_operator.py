"""The MPI operator's contract (kubeflow.org/v2beta1 MPIJob; the training operator's v1 MPIJob alike where
written so): what kubeflow/mpi-operator pkg/controller/mpi_job_controller.go gives the launcher and the workers.

- the launcher: K_MPI_JOB_ROLE=launcher; for Open MPI OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_default_
  hostfile=/etc/mpi/hostfile, OMPI_MCA_plm_rsh_args, OMPI_MCA_orte_set_default_slots (Intel MPI and MPICH their
  own); NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES emptied; the job's ConfigMap at /etc/mpi:
  `hostfile` (`<job>-worker-<i>.<job>.<namespace>.svc slots=<n>` a line) and `discover_hosts.sh` (an `echo` of
  each running worker, for elastic Horovod);
- every worker: K_MPI_JOB_ROLE=worker, hostname `<job>-worker-<i>` in the subdomain `<job>` (a Service of the
  job's name), and `/usr/sbin/sshd -De` as its command when it gives none.

The launcher's `mpirun` (or mpiexec) is read as kubetrain's own mpi run (foreign/kubeflow.py `mpirun_run`): its
program and options, started by kubetrain's mpirun, whose -np is the workers' slots and whose hostfile is
kubetrain's, which reaches the workers over ssh on Kubernetes (frameworks/mpi.py, manifests/mpi_ssh.py); another
launcher (horovodrun) runs as written. Either way the launcher gets the operator's variables and files below.
Locally every worker is this machine: the operator's hostfile has one line, `localhost slots=<workers × slots>`,
and the workers run nothing of their own (an sshd has nothing to serve).
"""

from __future__ import annotations

from ...jobspec.controller import Controller
from ..common import RoleWiring
from ..values import Idx, Value
from .base import Contract, ContractContext, Row, role_wiring, service_names

MPI_DIR = "/etc/mpi"
HOSTFILE = f"{MPI_DIR}/hostfile"
DISCOVER = f"{MPI_DIR}/discover_hosts.sh"
RSH_ARGS = "-o ConnectionAttempts=10"


def _worker(cctx: ContractContext) -> str | None:
    return cctx.role_of("Worker")


def _slots(cctx: ContractContext) -> int:
    return cctx.controller.slots_per_worker or 1


def _local(cctx: ContractContext) -> bool:
    """The workers are this machine (a port per replica, one address): mpirun starts the ranks itself."""
    return not cctx.ctx.topology.uniform


def hostfile(cctx: ContractContext) -> str:
    worker = _worker(cctx)
    if worker is None:
        return ""
    if _local(cctx):
        return f"localhost slots={cctx.replicas(worker) * _slots(cctx)}\n"
    return "".join(f"{host} slots={_slots(cctx)}\n" for host in _fqdns(cctx, worker))


def _fqdns(cctx: ContractContext, worker: str) -> list[str]:
    if "." in cctx.host(worker, 0):
        return cctx.hosts(worker)  # kubetrain's own stable names: already resolvable
    return [f"{cctx.name}-worker-{i}.{cctx.name}.{cctx.namespace}.svc" for i in range(cctx.replicas(worker))]


def discover_hosts(cctx: ContractContext) -> str:
    worker = _worker(cctx)
    if worker is None:
        return "#!/bin/sh\n"
    if _local(cctx):
        return f"#!/bin/sh\necho localhost:{cctx.replicas(worker) * _slots(cctx)}\n"
    return "#!/bin/sh\n" + "".join(f"echo {host}\n" for host in _fqdns(cctx, worker))


def wire_mpijob(cctx: ContractContext) -> RoleWiring:
    worker = _worker(cctx)
    names: dict[str, int] = {}
    if cctx.role == worker:
        for i in range(cctx.replicas()):
            for form in service_names(f"{cctx.name}-worker-{i}.{cctx.name}", cctx.namespace):
                names[form] = i
        env: dict[str, Value] = {"K_MPI_JOB_ROLE": "worker"}
        return role_wiring(cctx, env, pod_name=(f"{cctx.name}-worker-", Idx()), names=names,
                           hosting=_local(cctx) or cctx.ctx.settings.run is None)
    env = {"K_MPI_JOB_ROLE": "launcher"}
    impl = cctx.controller.mpi_implementation or "OpenMPI"
    hosts = cctx.path(HOSTFILE)
    if impl == "OpenMPI":
        env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_default_hostfile": hosts,
                    "OMPI_MCA_plm_rsh_args": RSH_ARGS, "OMPI_MCA_orte_set_default_slots": str(_slots(cctx))})
    elif impl == "Intel":
        env.update({"I_MPI_HYDRA_HOST_FILE": hosts, "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": RSH_ARGS,
                    "I_MPI_PERHOST": str(_slots(cctx))})
    else:
        env.update({"HYDRA_HOST_FILE": hosts, "HYDRA_LAUNCH_EXTRA_ARGS": RSH_ARGS})
    env.update({"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""})
    for form in service_names(f"{cctx.name}-launcher.{cctx.name}", cctx.namespace):
        names[form] = 0
    paths = {HOSTFILE: hostfile(cctx), DISCOVER: discover_hosts(cctx)}
    return role_wiring(cctx, env, paths=paths, pod_name=f"{cctx.name}-launcher", names=names)


def default_port(_controller: Controller, _type: str) -> int:
    return 22  # the workers' sshd


_SAMPLE = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "mpi"},
    "spec": {
        "slotsPerWorker": 2,
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "launcher", "image": "mpi:1", "command": ["mpirun", "-np", "4", "python", "hello.py"]}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "worker", "image": "mpi:1"}]}}},
        },
    },
}

_ROWS = (
    Row("command", "the launcher's command and args", "the launcher", "run as written (its mpirun reads the "
        "hostfile below)", "an `mpirun`/`mpiexec` is kubetrain's, here and on Kubernetes: its program and "
        "options, -np the workers' slots, kubetrain's hostfile (and ssh to the workers there); another launcher "
        "(horovodrun) as written"),
    Row("command", "the workers' command", "the workers", "as written; `/usr/sbin/sshd -De` when none",
        "nothing: mpirun starts every rank on this machine, without ssh"),
    Row("env", "K_MPI_JOB_ROLE", "every replica", "launcher | worker",
        example={"launcher-0": "launcher", "worker-1": "worker"}),
    Row("env", "OMPI_MCA_orte_default_hostfile", "the launcher (Open MPI)", "/etc/mpi/hostfile",
        "$KUBETRAIN_FILES_ROOT/etc/mpi/hostfile", example={"launcher-0": "{root}/etc/mpi/hostfile"}),
    Row("env", "OMPI_MCA_orte_keep_fqdn_hostnames", "the launcher (Open MPI)", '"true"',
        example={"launcher-0": "true"}),
    Row("env", "OMPI_MCA_plm_rsh_args", "the launcher (Open MPI)", f'"{RSH_ARGS}"', "the same; on Kubernetes "
        "without the operator, kubetrain's own ssh options (`-F` its ssh config), for its mpirun's ssh",
        example={"launcher-0": RSH_ARGS}, local_only=True),
    Row("env", "OMPI_MCA_orte_set_default_slots", "the launcher (Open MPI)", "slotsPerWorker (default 1)",
        example={"launcher-0": "2"}),
    Row("env", "I_MPI_HYDRA_HOST_FILE, I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS, I_MPI_PERHOST", "the launcher "
        "(Intel MPI)", "the hostfile, the ssh options, slotsPerWorker"),
    Row("env", "HYDRA_HOST_FILE, HYDRA_LAUNCH_EXTRA_ARGS", "the launcher (MPICH)", "the hostfile, the ssh options"),
    Row("env", "NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES", "the launcher", '"" (the launcher uses no '
        "GPU)", example={"launcher-0": ""}, concrete="NVIDIA_VISIBLE_DEVICES"),
    Row("file", HOSTFILE, "the launcher", "`<job>-worker-<i>.<job>.<namespace>.svc slots=<slots>`, a line per "
        "worker", "`localhost slots=<workers × slots>`: every rank on this machine",
        example={"launcher-0": "localhost slots=4\n"}, local_only=True),
    Row("file", DISCOVER, "the launcher", "`#!/bin/sh` and `echo <worker>.<job>.<namespace>.svc` per running "
        "worker", "`echo localhost:<workers × slots>`", example={"launcher-0": "#!/bin/sh\necho localhost:4\n"},
        local_only=True),
    Row("host", "<job>-worker-<i>.<job>", "each worker", "hostname `<job>-worker-<i>` in the subdomain `<job>` "
        "(and its namespace forms)", "127.0.0.1 in env values; warned in commands",
        example={"worker-1": "mpi-worker-1.mpi"}),
)

MPIJOB = Contract(
    "kubeflow.org/v2beta1",
    "MPIJob",
    "the MPI operator",
    "kubeflow/mpi-operator pkg/controller/mpi_job_controller.go newConfigMap, updateDiscoverHostsInConfigMap, "
    "newLauncherPodTemplate, newWorker",
    wire_mpijob,
    default_port,
    _ROWS,
    {"main": _SAMPLE},
    native_flavor="kubeflow",
    notes=("The per-job ssh keys (a Secret mounted at sshAuthMountPath) are not given locally: mpirun reaches "
           "local ranks without ssh.",),
)

MPIJOB_V1 = Contract(
    "kubeflow.org/v1",
    "MPIJob",
    "the Kubeflow training operator",
    "kubeflow/training-operator pkg/controller.v1/mpi/mpijob_controller.go (the v1 MPIJob: the hostfile and "
    "Open MPI variables as the MPI operator's; ranks reached through kubectl exec)",
    wire_mpijob,
    default_port,
    _ROWS,
    {"main": {**_SAMPLE, "apiVersion": "kubeflow.org/v1"}},
    native_flavor="kubeflow",
)

CONTRACTS: tuple[Contract, ...] = (MPIJOB, MPIJOB_V1)

__all__ = ["CONTRACTS", "DISCOVER", "HOSTFILE", "MPIJOB", "MPIJOB_V1", "discover_hosts", "hostfile"]
