"""Kubernetes backend: render a plan to manifests and drive them through the API."""
