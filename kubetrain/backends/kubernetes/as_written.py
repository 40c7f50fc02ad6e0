"""``kubetrain run FILE --backend kubernetes`` with a foreign kind: the document itself, on a cluster that runs it.

A PyTorchJob, JobSet, Volcano Job, DeepSpeedJob ... means what its own controller makes of it (the variables,
files, host names and launcher it gives each container). Where the cluster serves the kind, kubetrain submits the
document as its author wrote it, adding only its labels and an annotation (:func:`.submit.tag_as_written`), and
follows it with every verb through the kind's follower (:mod:`.flavors.written`). Where the cluster does not serve
it, or the user said ``--convert`` or named a flavor, the file is converted into a TrainJob and rendered, as
before. The as-written path changes nothing else in the document, except:

- a document with only ``metadata.generateName`` gets its name here (the prefix and five random characters, as
  the API server would): its pods are found by that name, which must be known before it is created;
- ``-n NS`` differing from the document's ``metadata.namespace`` wins (said in a warning), as for a TrainJob.
"""

from __future__ import annotations

import copy
import secrets
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...contract.errors import UsageError
from ..base import RunEvents, RunResult
from . import follow as following
from .flavors import Flavor, written_kind
from .liveness import no_sign_of_life
from .lookup import pod_scope
from .submit import dry_run, submit_as_written, tag_as_written
from .workload import JSON

if TYPE_CHECKING:
    from ...contract.logs import LogSink
    from ...jobspec import TrainJob
    from ..base import DryRun
    from .client.resources import Resource
    from .cluster import Cluster

_SUFFIX = string.ascii_lowercase + string.digits


@dataclass
class Written:
    """A foreign document to submit as written: the document (named, in its namespace), who follows it."""

    doc: JSON
    follower: Flavor
    resource: Resource
    namespace: str

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind"))


def plan(backend: Cluster, job: TrainJob, warn: Any) -> Written | None:
    """The job's foreign document, to submit as written, when the cluster serves its kind; else None (the job is
    converted and rendered, as for a TrainJob; ``warn`` hears why when the kind is not served)."""
    source = job.source
    if source is None:
        return None
    api_version, kind = str(source.get("apiVersion")), str(source.get("kind"))
    found = written_kind(api_version, kind)
    if found is None:
        return None
    follower, res = found
    caps = backend.capabilities()
    if follower.missing(caps) is not None or res not in follower.served_resources(backend.kube, caps):
        warn(f"this cluster does not serve {kind} ({api_version}): the file is converted and rendered for a "
             "flavor it runs (--convert does so without this note)")
        return None
    doc = copy.deepcopy(source)
    doc.pop("status", None)  # the controller's to write
    meta = doc.setdefault("metadata", {})
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise UsageError(f"the {kind} has neither metadata.name nor metadata.generateName")
        meta["name"] = f"{str(prefix)[:58]}{''.join(secrets.choice(_SUFFIX) for _ in range(5))}"
        meta.pop("generateName")
    asked = backend.options.namespace
    if asked and meta.get("namespace") and meta["namespace"] != asked:
        warn(f"the {kind} names namespace {meta['namespace']}; -n {asked} wins")
    namespace = asked or meta.get("namespace") or backend.namespace
    meta["namespace"] = namespace
    return Written(doc, follower, res, namespace)


def run(backend: Cluster, written: Written, job: TrainJob, *, detach: bool, dry_run_mode: DryRun | None,
        sink: LogSink | None, events: RunEvents) -> RunResult:
    """``run`` for a document as written: its dry runs, or submit and follow it (as ``KubernetesBackend.run``)."""
    what = f"{written.kind} as written"
    if dry_run_mode == "client":
        body = tag_as_written(written.doc, "dry-run")
        return RunResult(written.name, backend.name, plan={"apiVersion": "v1", "kind": "List", "items": [body]},
                         namespace=written.namespace, flavor=what)
    if dry_run_mode == "server":
        report = dry_run(backend.kube, [tag_as_written(written.doc, "dry-run")], written.namespace, flavor=what,
                         tag=False)
        report.engines = backend.engines(written.namespace)
        return RunResult(written.name, backend.name, dry_run=report, namespace=written.namespace, flavor=what)
    if dry_run_mode is not None:
        raise UsageError(f"dry run {dry_run_mode!r}: client or server")
    seen = backend.liveness(written.follower, written.namespace)
    if not seen.live:
        events.warning(no_sign_of_life(written.follower, seen, f"{written.kind} {written.name}"))
    sub = submit_as_written(backend.kube, written.doc, written.resource, written.namespace, what=what)
    controller = written.follower.controller
    events.created(sub.name, f"created {written.kind} {sub.name} as written in namespace {sub.namespace}"
                   + (f" (run by {controller.what})" if controller is not None else ""))
    result = RunResult(sub.name, backend.name, detached=detach, namespace=sub.namespace, flavor=what)
    if detach or job.spec.run_mode == "Pause" or job.spec.run_policy.suspend:
        result.status = backend.status_in(sub.name, sub.namespace)
        return result
    result.status = following.follow(backend, sub.name, sub.namespace, sink=sink, on_event=events.say,
                                     timeout=backend.options.timeout, cancel_on_interrupt=True,
                                     resource=written.resource,
                                     on_status=events.status if events.wants_status else None,
                                     scope=pod_scope(written.follower, sub.name, sub.root), flavor=written.follower)
    return result


__all__ = ["Written", "plan", "run"]
