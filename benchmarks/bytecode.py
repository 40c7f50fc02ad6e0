"""Bytecode for the timed commands, as an installed kubetrain has it.

``pip install`` compiles a package's modules when it installs them, and an editable checkout writes its
``__pycache__`` on the first import. A machine that sets ``PYTHONDONTWRITEBYTECODE`` (some CI images and
containers do) never writes it for an editable checkout: every start of ``kubetrain`` would then compile each
module edited since its bytecode was last written (about 50 ms of `kubetrain status` here), a cost no installed
kubetrain pays and the peer (a Go binary) never has. The benchmarks that time a command compile first.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import kubetrain


def compile_kubetrain() -> None:
    """Write the bytecode of every kubetrain module (``compileall`` writes whatever the environment says)."""
    compileall.compile_dir(str(Path(kubetrain.__file__).parent), quiet=1)
