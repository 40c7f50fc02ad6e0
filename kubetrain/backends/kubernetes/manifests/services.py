"""Objects beside the workload: the headless Service (job flavor), Services for the spec's ports, and the
ConfigMap with the job's files (MPI/DeepSpeed hostfile)."""

from __future__ import annotations

from typing import Any

from ....contract.naming import child_name, dns1035_label
from .context import Ctx
from .volumes import files_configmap_name, files_size, path_key

CONFIGMAP_MAX_BYTES = 1024 * 1024
"""The API server's limit on a ConfigMap's data."""


def headless_service(ctx: Ctx, name: str) -> dict[str, Any]:
    """Publishes every pod of the job as `<hostname>.<name>`; addresses exist before pods are ready, so
    replicas can find each other while they start."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": ctx.selector()},
    }


def port_services(ctx: Ctx) -> list[dict[str, Any]]:
    """One Service per role and service type for the spec's `ports` (Run:ai's ports), selecting every
    replica of the role."""
    out: list[dict[str, Any]] = []
    for view in ctx.roles:
        by_type: dict[str, list[dict[str, Any]]] = {}
        for port in view.settings.ports or []:
            item: dict[str, Any] = {"port": port.external or port.container, "targetPort": port.container,
                                    "protocol": port.protocol}
            if port.service_type == "NodePort" and port.external is not None:
                # A NodePort's external port is the one on every node (Run:ai's `external`, kubectl's nodePort);
                # inside the cluster the Service answers on the container's port.
                item["port"], item["nodePort"] = port.container, port.external
            if port.name is not None:
                item = {"name": port.name, **item}
            by_type.setdefault(port.service_type, []).append(item)
        for service_type, ports in by_type.items():
            if len(ports) > 1:  # a Service with several ports must name each
                for i, item in enumerate(ports):
                    item.setdefault("name", f"port-{i}")
            name = dns1035_label(child_name(ctx.layout.base, view.role, service_type.lower()))
            out.append({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": ctx.metadata(name, view.role),
                "spec": {"type": service_type, "selector": ctx.selector(view.role), "ports": ports},
            })
    return out


def files_configmap(ctx: Ctx) -> list[dict[str, Any]]:
    data = {**ctx.files, **({path_key(p): content for p, content in ctx.paths.items()} if not ctx.native else {})}
    if not data:
        return []
    size = files_size(data)
    if size > CONFIGMAP_MAX_BYTES:
        ctx.problems.add(("spec",), f"the job's files (hostfile) take {size:,} bytes, over a ConfigMap's 1 MiB",
                         hint="fewer worker replicas (more processes per replica)")
    return [{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.metadata(files_configmap_name(ctx)),
        "data": data,
    }]


__all__ = ["CONFIGMAP_MAX_BYTES", "files_configmap", "headless_service", "port_services"]
