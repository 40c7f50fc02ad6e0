"""Ports exposed through Services (Run:ai's ports): a NodePort's external port is the node port."""

from __future__ import annotations

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.foreign import convert
from tests.support.manifest_schemas import assert_valid


def test_a_node_ports_external_port_is_the_services_node_port() -> None:
    """Seed 004's ports, "Used together with --service-type": a NodePort's external port is the one opened on the
    nodes. It became the Service's port, and Kubernetes picked some other node port."""
    workload = {
        "apiVersion": "run.ai/v2alpha1", "kind": "TrainingWorkload", "metadata": {"name": "tb"},
        "spec": {"image": {"value": "python:3.12"}, "command": {"value": "python serve.py"},
                 "serviceType": {"value": "NodePort"},
                 "ports": {"items": {"tensorboard": {"value": {"container": 6006, "external": 30606}},
                                     "api": {"value": {"container": 8080, "external": 9090,
                                                       "serviceType": "LoadBalancer"}}}}},
    }
    objects = render_manifests(convert(workload).job, flavor="job").objects
    assert_valid(objects)
    services = {o["spec"]["type"]: o["spec"]["ports"] for o in objects
                if o["kind"] == "Service" and o["spec"].get("type")}
    assert services["NodePort"] == [{"port": 6006, "targetPort": 6006, "protocol": "TCP", "nodePort": 30606}]
    assert services["LoadBalancer"] == [{"port": 9090, "targetPort": 8080, "protocol": "TCP"}]
