"""render_manifests(job, flavor) → plain Kubernetes manifests (dicts) and the warnings for a user's eyes, as a
`Rendered`: the one entry point of the render. Pure: no I/O, no cluster, no client calls.

Flavors (docs/render.md has the full mapping) are the objects of `..flavors.FLAVORS`, looked up by name here
once and handed down in the render context; each gives the layout and the workload objects, and
:mod:`..manifests` what they share (the wired roles, pod templates, volumes, resources, policies, Services,
RBAC):

- `job` (default): an Indexed batch/v1 Job per role + a headless Service. Kubernetes ≥ 1.27 only.
- `jobset`: one JobSet (jobset.x-k8s.io/v1alpha2), a replicatedJob per role, gang restart.
- `volcano`: one Volcano Job (batch.volcano.sh/v1alpha1), gang scheduled, queue, policies.
- `kubeflow`: PyTorchJob / TFJob / MPIJob / JAXJob (kubeflow.org/v1) by framework.

Objects come in creation order. The first is the root: every other object is owned by it, so deleting
it deletes the job. Owner references need the root's uid, which exists only once the root is created:
`render` leaves them out (the output applies as is, e.g. through GitOps), and a submitter creates the
root, then the rest with `Rendered.with_owner(uid)` (or `render_manifests(..., owner_uid=uid)`).

Every field of the spec maps, or the render fails with one SpecError listing each field that the flavor
cannot express and the flavors that can. Things worth a human's eye (privileged pods) are warnings.
"""

from __future__ import annotations

import copy
import json
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from ....contract.choices import DEFAULT_FLAVOR
from ....frameworks import Topology
from ....jobspec import DistributedConfig, TrainJob
from ....plan import Plan, replica_counts
from ..flavors import FLAVORS, Flavor, get_flavor
from ..manifests import mpi_ssh
from ..manifests.context import Ctx, Options, check_spec, wire_roles
from ..manifests.errors import Problems
from ..manifests.services import files_configmap, port_services
from .output import dump, to_json, to_yaml

ETCD_MAX_BYTES = 1536 * 1024
"""etcd's default request limit (1.5 MiB): an object larger than this cannot be stored."""

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet: no vowels, no 0/1/3


@dataclass(frozen=True)
class Rendered:
    """The manifests of one job, root first, and the warnings to show the user."""

    objects: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    flavor: str = DEFAULT_FLAVOR
    name: str = ""
    """The job's name (a namePrefix job gets a generated one)."""
    topology: Topology | None = None
    """Where the replicas are reachable (stable DNS names): what `plan` gives the same addresses for."""

    @property
    def root(self) -> dict[str, Any]:
        return self.objects[0]

    @property
    def owned(self) -> list[dict[str, Any]]:
        return self.objects[1:]

    def owner_reference(self, uid: str) -> dict[str, Any]:
        root = self.root
        # Not `controller: true`: Kueue skips Jobs controlled by a kind it manages (as a parent Job
        # is), and a controller reference is not what makes the garbage collector cascade.
        return {"apiVersion": root["apiVersion"], "kind": root["kind"], "name": root["metadata"]["name"],
                "uid": uid}

    def with_owner(self, uid: str) -> list[dict[str, Any]]:
        """Copies of the objects, every one but the root owned by the root (whose uid is `uid`)."""
        if not uid:
            raise ValueError("the root's uid is needed (it exists once the root is created)")
        out = [copy.deepcopy(self.root)]
        ref = self.owner_reference(uid)
        for obj in self.owned:
            child = copy.deepcopy(obj)
            child["metadata"]["ownerReferences"] = [dict(ref)]
            out.append(child)
        return out


def _job_of(job_or_plan: TrainJob | Plan, name: str | None) -> tuple[TrainJob, str | None]:
    if isinstance(job_or_plan, Plan):
        # A plan's addresses are its backend's (127.0.0.1 locally); only its job and name carry over.
        return job_or_plan.job, name or job_or_plan.name
    if not isinstance(job_or_plan, TrainJob):
        raise TypeError(f"render takes a TrainJob or a Plan, not {type(job_or_plan).__name__}")
    return job_or_plan, name


def generated_name(prefix: str) -> str:
    """What the API server would make of generateName: the prefix and 5 random characters."""
    return prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def render_manifests(
    job_or_plan: TrainJob | Plan,
    flavor: str | Flavor = DEFAULT_FLAVOR,
    namespace: str | None = None,
    *,
    name: str | None = None,
    config: DistributedConfig | None = None,
    owner_uid: str | None = None,
    api_access: bool = False,
    uid: int | None = None,
    gid: int | None = None,
) -> Rendered:
    """Render `job` for `flavor` (a name of `FLAVORS`). Raises SpecError naming every field the flavor cannot
    express, UsageError (a ValueError) for an unknown flavor.

    `namespace`: overrides metadata.namespace (none: the objects carry no namespace).
    `name`: the job's name (default metadata.name, or namePrefix plus 5 random characters).
    `config`: Kale's DistributedConfig, applied to every replica of every role.
    `owner_uid`: the root's uid, once created: every other object gets an owner reference to it.
    `api_access`: the replicas call the Kubernetes API (cluster resolver): mount the service account token.
    `uid`/`gid`: the submitting user's, for `security.runAsUser: true` (default: this process's).
    """
    chosen = get_flavor(flavor)
    job, name = _job_of(job_or_plan, name)
    if config is not None:
        job = job.with_config(config)
    if name is None:
        name = job.metadata.name or generated_name(job.metadata.name_prefix or "job-")
    layout = chosen.layout(name, replica_counts(job.spec), job.spec)
    problems = Problems()
    native = chosen.runs_controller(job.spec.controller)
    topology, roles, files, the_plan = wire_roles(job, name, layout, problems, native=native)
    api_access = api_access or job.spec.api_access
    options = Options(namespace=namespace or job.metadata.namespace, api_access=api_access, uid=uid, gid=gid)
    peers = {f.name: f.features for f in FLAVORS.values()}
    ctx = Ctx(job, name, chosen, layout, options, topology, roles, files, problems, peers,
              paths=dict(the_plan.paths), names=dict(the_plan.names), native=native)
    check_spec(ctx)
    mpi_ssh.apply(ctx, chosen.ssh_keys(ctx), chosen.mpi_over_ssh(ctx))
    objects = chosen.objects(ctx)
    if not objects:
        _pod_problems(ctx)
    objects += files_configmap(ctx)
    objects += mpi_ssh.objects(ctx)
    objects += port_services(ctx)
    if api_access:
        from ..manifests.rbac import rbac_objects

        # RoleBinding subjects need a namespace: the default one when the job names none.
        objects += rbac_objects(name, options.namespace or "default", job.spec.service_account,
                                object_name=layout.base)
    _check_sizes(ctx, objects)
    problems.raise_if_any()
    rendered = Rendered(objects, list(ctx.warnings), chosen.name, name, topology)
    if owner_uid is not None:
        rendered = replace(rendered, objects=rendered.with_owner(owner_uid))
    return rendered


def _pod_problems(ctx: Ctx) -> None:
    """The flavor refused the job before rendering its pods (kubeflow: no kind for the framework): render
    them anyway, for their problems, so that every problem is reported at once rather than in rounds."""
    from ..manifests.pod import PodStyle, pod_template

    assert ctx.problems.errors, f"the {ctx.flavor.name} flavor rendered no objects and said nothing"
    for view in ctx.roles:
        pod_template(ctx, view, PodStyle(index_env=ctx.layout.index_env))


def _check_sizes(ctx: Ctx, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        size = len(json.dumps(obj, separators=(",", ":")).encode())
        if size > ETCD_MAX_BYTES:
            what = f"{obj['kind']} {obj['metadata']['name']}"
            ctx.problems.add(("spec",), f"{what} would take {size:,} bytes, over etcd's 1.5 MiB object limit",
                             hint=ctx.flavor.oversize_hint)


__all__ = [
    "ETCD_MAX_BYTES",
    "FLAVORS",
    "Rendered",
    "dump",
    "generated_name",
    "render_manifests",
    "to_json",
    "to_yaml",
]
