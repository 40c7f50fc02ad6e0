"""The cluster from kubetrain's env contract alone: no API call, the same answers locally and on any cluster.

Every replica kubetrain starts has KUBETRAIN_JOB, KUBETRAIN_FRAMEWORK, KUBETRAIN_ROLE,
KUBETRAIN_REPLICA_INDEX, KUBETRAIN_NUM_REPLICAS and KUBETRAIN_CLUSTER (the cluster as JSON), plus its
framework's own variables. `EnvClusterResolver` reads them (falling back to TF_CONFIG, so it also works
under other launchers that set only that), and the helpers here give each framework's view: torch's
master/world/rank, JAX's coordinator, the MPI/DeepSpeed hostfile.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract import env_names
from .cluster_spec import ClusterResolver, ClusterSpec, expand_cluster, within_config

__all__ = [
    "FORMATS",
    "EnvClusterResolver",
    "JaxDist",
    "TorchDist",
    "framework_cluster",
    "local_accelerators",
    "main",
    "resolve_output",
]



def framework_cluster(framework: str | None, roles: Iterable[str]) -> list[str]:
    """The roles of `roles` in the cluster `framework` describes to its replicas (TensorFlow's TF_CONFIG leaves
    the evaluator out), as the framework's record says (`contract.frameworks`); every one for another name."""
    if not framework:
        return list(roles)
    # Imported here, not with the module: most replicas never ask, and the records take milliseconds to build.
    from ..contract.frameworks import record_of

    try:
        record = record_of(framework)
    except ValueError:  # not one of kubetrain's frameworks (another launcher's name): nothing is left out
        return list(roles)
    return record.in_cluster(roles)

FORMATS = ("json", "tf-config", "torch-env", "jax-env", "hostfile")


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r} has no port")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} is not a number: {value!r}") from None


def local_accelerators(environ: Mapping[str, str] | None = None, dev: str = "/dev") -> dict[str, int]:
    """Accelerators this container can see, without any API: GPUs from CUDA_VISIBLE_DEVICES when set,
    else the NVIDIA device nodes (`/dev/nvidia0`, ...: the device plugin mounts only the allocated
    ones); TPUs from TPU_VISIBLE_CHIPS, else `/dev/accel*`. Types with none are left out."""
    environ = os.environ if environ is None else environ
    out: dict[str, int] = {}
    base = Path(dev)

    def devices(pattern: str) -> int:
        try:
            return sum(1 for p in base.iterdir() if re.fullmatch(pattern, p.name))
        except OSError:
            return 0

    cuda = environ.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        gpus = len([d for d in cuda.split(",") if d.strip() and d.strip() != "-1"])
    else:
        gpus = devices(r"nvidia\d+")
    chips = environ.get("TPU_VISIBLE_CHIPS")
    tpus = len([c for c in chips.split(",") if c.strip()]) if chips is not None else devices(r"accel\d+")
    if gpus:
        out["GPU"] = gpus
    if tpus:
        out["TPU"] = tpus
    return out


@dataclass(frozen=True)
class TorchDist:
    """torch.distributed's env:// contract for one process."""

    master_addr: str
    master_port: int
    world_size: int
    rank: int
    local_rank: int = 0
    node_rank: int = 0
    local_world_size: int = 1

    @property
    def init_method(self) -> str:
        """For `torch.distributed.init_process_group(init_method=...)`."""
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"tcp://{host}:{self.master_port}"

    def as_env(self) -> dict[str, str]:
        return {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "WORLD_SIZE": str(self.world_size),
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "NODE_RANK": str(self.node_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
        }


@dataclass(frozen=True)
class JaxDist:
    """What `jax.distributed.initialize` needs."""

    coordinator_address: str
    num_processes: int
    process_id: int
    local_process_id: int = 0

    def initialize_kwargs(self) -> dict[str, Any]:
        """`jax.distributed.initialize(**dist.initialize_kwargs())`."""
        return {
            "coordinator_address": self.coordinator_address,
            "num_processes": self.num_processes,
            "process_id": self.process_id,
        }

    def as_env(self) -> dict[str, str]:
        return {
            "JAX_COORDINATOR_ADDRESS": self.coordinator_address,
            "JAX_NUM_PROCESSES": str(self.num_processes),
            "JAX_PROCESS_ID": str(self.process_id),
            "JAX_LOCAL_PROCESS_ID": str(self.local_process_id),
        }


class EnvClusterResolver(ClusterResolver):
    """The cluster, this replica's task and each framework's wiring, from the environment only.

    Source: KUBETRAIN_CLUSTER / KUBETRAIN_ROLE / KUBETRAIN_REPLICA_INDEX (any kubetrain replica, on any
    backend), else TF_CONFIG. On Kubernetes the addresses are the replicas' stable DNS names, locally
    `127.0.0.1:<port>`.

    `cluster_spec()` holds every role, except for TensorFlow jobs (KUBETRAIN_FRAMEWORK=tensorflow), where
    it holds the roles of TF_CONFIG's cluster (chief, worker, ps: not the evaluator) so that
    `tf_config()` equals the TF_CONFIG kubetrain sets. `roles` chooses them explicitly.

    `environ`: the variables to read (default: `os.environ`, read at each call).
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = "grpc",
        roles: Sequence[str] | None = None,
    ) -> None:
        self._environ = environ
        self.task_type = task_type
        self.task_id = task_id
        self.rpc_layer = rpc_layer
        self._roles = tuple(roles) if roles is not None else None

    # -- the environment ---------------------------------------------------------------------------

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    @property
    def under_kubetrain(self) -> bool:
        return env_names.CLUSTER in self.environ

    @property
    def job_name(self) -> str | None:
        return self.environ.get(env_names.JOB)

    @property
    def framework(self) -> str | None:
        return self.environ.get(env_names.FRAMEWORK)

    def _tf_config(self) -> dict[str, Any]:
        raw = self.environ.get("TF_CONFIG")
        if not raw:
            return {}
        try:
            config = json.loads(raw)
        except ValueError:
            raise ValueError(f"TF_CONFIG is not JSON: {raw!r}") from None
        if not isinstance(config, dict):
            raise ValueError(f"TF_CONFIG is not a JSON object: {raw!r}")
        return config

    def cluster(self) -> dict[str, list[str]]:
        """Every role and its addresses, in role order (KUBETRAIN_CLUSTER; else TF_CONFIG's cluster)."""
        raw = self.environ.get(env_names.CLUSTER)
        if raw:
            return expand_cluster(raw)
        return ClusterSpec(self._tf_config().get("cluster") or {}).as_dict()

    # -- the ClusterResolver API ---------------------------------------------------------------------

    def _own_task(self) -> tuple[str | None, int | None]:
        task = self._tf_config().get("task") or {}
        role = self.environ.get(env_names.ROLE) or task.get("type")
        index = _int(self.environ, env_names.REPLICA_INDEX)
        if index is None and task.get("index") is not None:
            index = int(task["index"])
        return role, index

    @property
    def environment(self) -> str:
        return str(self._tf_config().get("environment") or "")

    def cluster_spec(self) -> ClusterSpec:
        cluster = self.cluster()
        if self._roles is not None:
            roles: Sequence[str] = [r for r in self._roles if r in cluster]
        elif self.under_kubetrain:
            roles = framework_cluster(self.framework, cluster)
        else:
            roles = list(cluster)
        return ClusterSpec({r: cluster[r] for r in roles})

    def num_accelerators(
        self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None
    ) -> dict[str, int]:
        """Accelerators of this replica, seen from inside it (`local_accelerators`); the environment
        says nothing about other tasks', so asking for another task is an error. `config_proto` (TensorFlow's
        ConfigProto) limits them as a session started with it would see them (`within_config`)."""
        own = (self.task_type, self.task_id)
        if (task_type is not None and task_type != own[0]) or (task_id is not None and task_id != own[1]):
            raise ValueError(
                "EnvClusterResolver only knows this replica's accelerators; "
                "KubernetesClusterResolver reads any task's from its pod"
            )
        return within_config(local_accelerators(self.environ), config_proto)

    # -- other frameworks ----------------------------------------------------------------------------

    def _node(self) -> tuple[int, int, tuple[str, int]]:
        """(this replica's global node rank, total replicas, first replica's host and port): replicas
        numbered across roles in cluster order, as kubetrain numbers ranks."""
        cluster = self.cluster()
        if not cluster or not any(cluster.values()):
            raise ValueError("no cluster in the environment (KUBETRAIN_CLUSTER or TF_CONFIG): not a kubetrain replica?")
        role, index = self.task_type, self.task_id
        offset = 0
        node: int | None = None
        for name, addresses in cluster.items():
            if name == role:
                node = offset + (index or 0)
            offset += len(addresses)
        if node is None:
            raise ValueError(f"role {role!r} is not in the cluster ({', '.join(cluster)})")
        first = next(a for a in cluster.values() if a)[0]
        return node, offset, _split_address(first)

    def torch(self) -> TorchDist:
        """torch.distributed's contract for this process: kubetrain's MASTER_ADDR/MASTER_PORT/WORLD_SIZE/
        RANK/LOCAL_RANK when set (pytorch and DeepSpeed jobs; RANK computed from NODE_RANK and LOCAL_RANK
        where torchrun would set it), else derived from the cluster, one process per replica, rank 0 on
        the first replica of the first role."""
        env = self.environ
        local_rank = _int(env, "LOCAL_RANK") or 0
        procs = _int(env, "LOCAL_WORLD_SIZE") or _int(env, "NPROC_PER_NODE") or 1
        if env.get("MASTER_ADDR") and env.get("MASTER_PORT") and env.get("WORLD_SIZE"):
            node_rank = _int(env, "NODE_RANK") or _int(env, "GROUP_RANK")
            rank = _int(env, "RANK")
            if rank is None:
                rank = (node_rank or 0) * procs + local_rank
            if node_rank is None:
                node_rank = rank // procs
            return TorchDist(
                env["MASTER_ADDR"], int(env["MASTER_PORT"]), int(env["WORLD_SIZE"]), rank, local_rank, node_rank, procs
            )
        node, total, (host, port) = self._node()
        return TorchDist(host, port, total * procs, node * procs + local_rank, local_rank, node, procs)

    def jax(self) -> JaxDist:
        """jax.distributed's coordinator, process count and this process's id: kubetrain's JAX_* variables
        when set, else derived from the cluster (the first replica coordinates)."""
        env = self.environ
        local = _int(env, "JAX_LOCAL_PROCESS_ID") or 0
        if env.get("JAX_COORDINATOR_ADDRESS") and env.get("JAX_NUM_PROCESSES") and env.get("JAX_PROCESS_ID"):
            return JaxDist(env["JAX_COORDINATOR_ADDRESS"], int(env["JAX_NUM_PROCESSES"]), int(env["JAX_PROCESS_ID"]),
                           local)  # fmt: skip
        node, total, (host, port) = self._node()
        host = f"[{host}]" if ":" in host else host
        return JaxDist(f"{host}:{port}", total, node, local)

    def hostfile(self, role: str | None = None, slots: int | None = None) -> str:
        """The MPI/DeepSpeed hostfile (`host slots=N`, a line per replica): kubetrain's own file
        (KUBETRAIN_HOSTFILE) when it exists, else generated from the cluster — the `worker` role (or
        `role`), `slots` per replica (default LOCAL_WORLD_SIZE, else 1); replicas sharing a host (locally,
        127.0.0.1, written `localhost` so mpirun needs no ssh) are one line with their slots summed."""
        path = self.environ.get(env_names.HOSTFILE)
        if path and role is None and slots is None:
            try:
                return Path(path).read_text()
            except OSError:
                pass
        cluster = self.cluster()
        if role is None:
            role = "worker" if "worker" in cluster else next((r for r in cluster if r != "launcher"), None)
        if role is None or role not in cluster:
            raise ValueError(f"no role {role!r} in the cluster ({', '.join(cluster) or 'empty'})")
        per = slots or _int(self.environ, "LOCAL_WORLD_SIZE") or 1
        counts: dict[str, int] = {}
        for address in cluster[role]:
            host, _port = _split_address(address)
            host = "localhost" if host == "127.0.0.1" else host
            counts[host] = counts.get(host, 0) + per
        return "".join(f"{host} slots={n}\n" for host, n in counts.items())

    def describe(self) -> dict[str, Any]:
        """Everything known from the environment, as JSON-ready data (`kubetrain resolve --format json`)."""
        return {
            "job": self.job_name,
            "framework": self.framework,
            "task": {"type": self.task_type, "index": self.task_id},
            "cluster": self.cluster(),
        }


# -- `kubetrain resolve` --------------------------------------------------------------------------------


def _exports(env: Mapping[str, str]) -> str:
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


def resolve_output(fmt: str = "json", resolver: ClusterResolver | None = None) -> str:
    """What `kubetrain resolve --format FMT` prints, from `resolver` (default: `EnvClusterResolver()`).

    - `json`: job, framework, this task and the cluster (every role);
    - `tf-config`: TF_CONFIG (for `export TF_CONFIG="$(kubetrain resolve --format tf-config)"`);
    - `torch-env`, `jax-env`: `export NAME=value` lines (for `eval "$(kubetrain resolve --format torch-env)"`);
    - `hostfile`: `host slots=N` lines.
    A KubernetesClusterResolver gives `json` and `tf-config` (pod IPs); the others need the env contract.
    """
    resolver = resolver or EnvClusterResolver()
    if fmt == "json":
        if isinstance(resolver, EnvClusterResolver):
            data = resolver.describe()
        else:
            data = {"task": {"type": resolver.task_type, "index": resolver.task_id},
                    "cluster": resolver.cluster_spec().as_dict()}  # fmt: skip
        return json.dumps(data, indent=2) + "\n"
    if fmt == "tf-config":
        return json.dumps(resolver.tf_config(), separators=(",", ":")) + "\n"
    if fmt in ("torch-env", "jax-env", "hostfile"):
        if not isinstance(resolver, EnvClusterResolver):
            raise ValueError(f"--format {fmt} comes from the env contract (--source env)")
        if fmt == "torch-env":
            return _exports(resolver.torch().as_env())
        if fmt == "jax-env":
            return _exports(resolver.jax().as_env())
        return resolver.hostfile()
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `kubetrain resolve` (shared by the CLI and `main`)."""
    parser.add_argument("--format", dest="format", choices=FORMATS, default="json",
                        help="what to print (default: json)")  # fmt: skip
    parser.add_argument(
        "--source",
        choices=("env", "kubernetes"),
        default="env",
        help="env: kubetrain's env contract, no API call (default); kubernetes: list the job's pods (pod IPs)",
    )
    parser.add_argument("-n", "--namespace", help="with --source kubernetes: the pods' namespace")


def run(args: argparse.Namespace) -> int:
    """`kubetrain resolve` with parsed `args`: prints to stdout; problems to stderr with status 1."""
    try:
        resolver: ClusterResolver
        if args.source == "kubernetes":
            from .apiserver import KubernetesClusterResolver

            resolver = KubernetesClusterResolver(namespace=args.namespace)
        else:
            resolver = EnvClusterResolver()
        text = resolve_output(args.format, resolver)
    except Exception as exc:
        # Bad input or an unreachable/refusing API is the user's to fix: a message, not a traceback.
        expected = (ValueError, RuntimeError, ImportError, OSError)
        if not isinstance(exc, expected) and not type(exc).__module__.startswith("kubernetes"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`kubetrain resolve` standalone (needs only the standard library for --source env)."""
    parser = argparse.ArgumentParser(
        prog="kubetrain resolve",
        description="Print this replica's cluster, from kubetrain's env contract or the Kubernetes API.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
