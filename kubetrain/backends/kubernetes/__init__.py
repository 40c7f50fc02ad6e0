"""Kubernetes backend: render a plan to manifests and drive them through the API."""

from .render import FLAVORS, Rendered, render, render_job, render_manifests, render_with_warnings

__all__ = ["FLAVORS", "Rendered", "render", "render_job", "render_manifests", "render_with_warnings"]
