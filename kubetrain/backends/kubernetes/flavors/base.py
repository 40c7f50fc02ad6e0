"""`Flavor`: everything kubetrain does differently per Kubernetes engine, in one object per engine.

A flavor says where its workload lives in the API (group, version, kinds) and what to install when a
cluster lacks it; what it can express (`Features`, which render checks against and names the flavors
that can when it cannot); how it renders (`layout`, `objects`); how its workload's state maps to the
status model (`roles`, `engine_state`, `conditions`, ...); how it is suspended and resumed; and its
few other particulars (the extra reads that explain a Pending job, what happens to hosting replicas
when the root ends). The base class holds what most flavors share; each flavor module
(`flavors/<name>.py`) subclasses it and overrides the rest. `flavors.FLAVORS` is the one list of them.

A flavor module imports the shared render helpers (which pull in pydantic and the planner) when it
renders, not when it is imported: status, list and logs never need them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ....contract.features import Features
from ....contract.labels import ROLE_LABEL
from ....status import Condition, JobPhase
from ..client.errors import KubernetesError
from ..client.resources import Resource
from ..workload import (
    JSON,
    EngineState,
    RoleInfo,
    api_group,
    is_root,
    labels,
    meta,
    object_conditions,
)

if TYPE_CHECKING:
    from ....jobspec import JobSpec
    from ....jobspec.controller import Controller as SpecController
    from ..client.kube import Kube
    from ..diagnosis import Diagnosis
    from ..manifests.context import Ctx, Layout
    from ..served import Served
    from ..workload import FoundJob


class FlavorUnavailable(KubernetesError):
    """The chosen flavor's custom resources are not served by this cluster."""

    exit_code = 2


@dataclass(frozen=True)
class Controller:
    """The engine's controller, as a client can see that it is alive (:mod:`..liveness`) and tell a user
    where to look when it is not."""

    what: str
    """How a person names it: "the JobSet controller"."""
    namespaces: tuple[str, ...] = ()
    """Where its install puts it, the usual first."""
    deployments: tuple[str, ...] = ()
    """Its Deployments there; each must have a ready replica (Volcano: the controllers and the scheduler). Their
    leader-election Leases are the ones there whose holder is one of their pods (``<deployment>-<hash>-<id>_<uid>``,
    controller-runtime's identity), so no Lease name needs knowing."""
    builtin: bool = False
    """Part of Kubernetes itself (the Job controller): alive wherever the API server is."""

    def hint(self) -> str:
        """Where to look: ``kubectl get pods -n jobset-system``."""
        if self.builtin:
            return "kubectl get pods -n kube-system"
        return f"kubectl get pods -n {self.namespaces[0]}" if self.namespaces else "kubectl get pods -A"


@dataclass(frozen=True)
class Flavor:
    """One Kubernetes engine kubetrain renders for and drives. Subclassed once per flavor."""

    name: str
    summary: str
    """One line for docs and help: what the job becomes."""
    group: str
    """The API group of its workload (``batch`` for the job flavor)."""
    version: str
    """The version kubetrain renders."""
    resources: tuple[Resource, ...]
    """Its workload kinds, the likeliest first (one, except kubeflow's kind per framework)."""
    install: str | None = None
    """What to install when a cluster lacks the group; None: part of Kubernetes, always served."""
    auto: int | None = None
    """Preference when no flavor is named (lowest first); None: used only when named."""
    features: Features = field(default_factory=Features)
    replaced_pods_are_restarts: bool = False
    """A replica's earlier failed pods count as its restarts (the controller replaces a failed pod or
    restarts its container); False: the engine counts restarts of the whole gang itself."""
    oversize_hint: str | None = None
    """What to suggest when one of its objects passes etcd's size limit."""
    index_fields: tuple[str, ...] = ()
    """Downward-API fields that hold a pod's replica index on this engine (an Indexed Job's completion index):
    what a pod whose image runs by its ENTRYPOINT reads its index from, with no start-up script."""
    gpu_share_resources: tuple[str, str, str] | None = None
    """HAMi's (count, memory, cores) resource names where the engine's own device plugin takes them
    (Volcano's vGPU); None: HAMi's own names."""
    controller: Controller | None = None
    """Its controller: how its liveness is seen, and what to tell when nothing acts on a job."""
    as_written: bool = False
    """A document of this kind submitted as its author wrote it (kubetrain's labels added, nothing rendered):
    its pods carry the controller's labels only (:meth:`pod_selector`), its roles are the kind's own."""

    def __str__(self) -> str:
        return self.name

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    # -- the API: served? where? -----------------------------------------------------------------------

    def missing(self, caps: Served) -> str | None:
        """Why this flavor cannot run on a cluster that serves `caps`, or None."""
        if self.install is None or caps.serves(self.group, self.version):
            return None
        served = caps.groups.get(self.group)
        if served:
            return (f"the {self.name} flavor needs {self.group}/{self.version}, but this cluster serves only "
                    f"{', '.join(self.group + '/' + v for v in served)}: upgrade {self.install}")
        return f"the {self.name} flavor needs {self.install}: this cluster does not serve the {self.group} API group"

    def served_resources(self, kube: Kube, caps: Served) -> list[Resource]:
        """Its workload kinds this cluster serves (what a lookup lists)."""
        return list(self.resources) if self.missing(caps) is None else []

    def check_served(self, kube: Kube, root: Mapping[str, Any]) -> None:
        """Raise FlavorUnavailable if the cluster cannot take this rendered root (beyond its API group)."""

    def owns(self, obj: Mapping[str, Any]) -> bool:
        """Whether a workload object is of this flavor (for objects without kubetrain's flavor annotation)."""
        return api_group(obj) == self.group and obj.get("kind") in {r.kind for r in self.resources}

    def resource_of(self, root: Mapping[str, Any]) -> Resource:
        """The resource of a workload object of this flavor."""
        return self.resources[0]

    def pod_selector(self, name: str, root: Mapping[str, Any] | None = None) -> str:
        """The label selector of the job's pods (kubetrain's job label on what kubetrain renders)."""
        from ....contract.labels import JOB_LABEL
        from ....contract.naming import label_value

        return f"{JOB_LABEL}={label_value(name)}"

    def pods_owned(self) -> bool:
        """The job's pods are told by ownership (they carry no label naming the job): the selector is
        ``pod_selector``'s, and only pods the root owns, directly or through one object it owns, are kept."""
        return False

    # -- render ----------------------------------------------------------------------------------------

    def layout(self, name: str, counts: dict[str, int], spec: JobSpec | None = None) -> Layout:
        """Object names and replica addresses for a job called `name` with these role sizes (`spec`: the job,
        where the engine's names depend on it, as an MPIJob v2beta1's do)."""
        raise NotImplementedError

    def runs_controller(self, controller: SpecController | None) -> bool:
        """This flavor's engine is `controller` itself (a PyTorchJob on the kubeflow flavor): it gives the
        contract's variables, files and host names, so kubetrain renders the job as that controller's kind,
        with the source's own names, and adds only its own variables."""
        return False

    def objects(self, ctx: Ctx) -> list[dict[str, Any]]:
        """The workload object(s), root first; problems go to `ctx.problems`."""
        raise NotImplementedError

    def ssh_keys(self, ctx: Ctx) -> Literal["plugin", "operator"] | None:
        """Who makes the key pair of a job's ssh between its pods for programs with an sshd of their own
        (manifests/mpi_ssh.py): the engine ("plugin": Volcano's ssh plugin; "operator": the MPI Operator), or
        None: kubetrain, in a Secret it fills when it submits the job. kubetrain's own sshd (MPI workers without
        a program of their own) always runs with kubetrain's keys."""
        return None

    def mpi_over_ssh(self, ctx: Ctx) -> bool:
        """An MPI launcher reaches its workers over ssh (False: the engine's own way, kubectl exec)."""
        return True

    # -- status ----------------------------------------------------------------------------------------

    def order(self, workloads: Sequence[Mapping[str, Any]]) -> list[JSON]:
        """Its workload objects, root first."""
        return [dict(w) for w in workloads]

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        """Roles and their replica counts, in the order the spec lists them."""
        raise NotImplementedError

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        """What the engine says of the job as a whole."""
        return EngineState(JobPhase.RUNNING)

    def conditions(self, workloads: Sequence[Mapping[str, Any]], created: float | None) -> list[Condition]:
        """The workload's conditions in the status model."""
        return [c for obj in workloads for c in object_conditions(obj, created)]

    def finished_indexes(self, workloads: Sequence[Mapping[str, Any]]) -> tuple[
            dict[str, set[int]], dict[str, set[int]]]:
        """(role → indexes completed, role → indexes failed) that the workload records itself."""
        return {}, {}

    # -- control ---------------------------------------------------------------------------------------

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        """Stop the job's pods and keep the job (`suspend`), or start them again."""
        raise KubernetesError(f"job {job.name}: cannot {'suspend' if suspend else 'resume'} a {self.name} job")

    def scale(self, kube: Kube, job: FoundJob, replicas: int) -> None:
        """Change an elastic job's number of workers while it runs (default: refused, saying why)."""
        raise KubernetesError(f"job {job.name}: a {self.name} job cannot change its number of workers while it runs; "
                              "the job and kubeflow flavors can")

    def keeps_finished_pods(self, root: Mapping[str, Any]) -> bool:
        """Whether a cancel keeps the pods that have finished (for their logs)."""
        return False

    def stop_hosts(self, kube: Kube, namespace: str, workloads: Sequence[Mapping[str, Any]]) -> None:
        """The root has ended: stop what only hosted its processes and would run on (root first in
        `workloads`)."""

    def pending_causes(self, kube: Kube, namespace: str, root: Mapping[str, Any]) -> list[Diagnosis]:
        """Causes holding Pending replicas that only this engine's objects tell (requests allowed)."""
        return []


def role_of(obj: Mapping[str, Any]) -> str:
    """The role a per-role workload object (a Job of the job flavor) runs."""
    return labels(obj).get(ROLE_LABEL) or meta(obj).get("name", "")


def root_first(workloads: Sequence[Mapping[str, Any]]) -> list[JSON]:
    return sorted((dict(w) for w in workloads), key=lambda o: (not is_root(o), meta(o).get("name", "")))


__all__ = ["Controller", "Features", "Flavor", "FlavorUnavailable", "role_of", "root_first"]
