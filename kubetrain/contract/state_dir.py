"""Where kubetrain keeps its state on this machine: one directory, shared by the backends (the local backend's
job store and replica logs, the logs the Kubernetes backend keeps of a job) and so found one way."""

from __future__ import annotations

import os
from pathlib import Path

from . import env_names


def state_dir() -> Path:
    """``$KUBETRAIN_HOME``, else ``$XDG_STATE_HOME/kubetrain``, else ``~/.local/state/kubetrain``."""
    home = os.environ.get(env_names.HOME)
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    # The XDG spec says a relative path is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "kubetrain"
    return Path.home() / ".local" / "state" / "kubetrain"


__all__ = ["state_dir"]
