"""`kubetrain ui`: the web view of jobs, replicas, live logs and metrics, local and on the cluster.

A Starlette app served by uvicorn (the optional extra `kubetrain[ui]`). Pages are server-rendered HTML
(Jinja2 templates, `pages.py`) and SVG; a small script of kubetrain's own (`static/ui.js`) keeps them
current from server-sent events, which the server sends when the backends' own change signals fire
(`changes.py`): the page never polls.

Layering: below the CLI, above the backends. Only `app.py`, `server.py` and `connections.py` (inside a
function) import Starlette and uvicorn, so the rest (views, SVG plots, security checks, change feeds) is
plain Python, testable without them.
"""

from __future__ import annotations

INSTALL_HINT = "pip install 'kubetrain[ui]'"
"""What to install when the web view's dependencies are missing."""


def missing_dependencies() -> list[str]:
    """The web view's dependencies that cannot be imported (empty: `kubetrain ui` can serve)."""
    import importlib

    missing = []
    # regex: the page's grep, stopped when too slow; jinja2: the pages' templates
    for name in ("starlette", "uvicorn", "regex", "jinja2"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


__all__ = ["INSTALL_HINT", "missing_dependencies"]
