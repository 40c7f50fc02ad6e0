"""The Kubernetes backend's files import one way: no circle of files, nothing back up its layers.

The layers contract in pyproject.toml (lint-imports) holds the order between the package's parts; inside a
part (`flavors/`, `manifests/`, `client/`) files could still import each other in a circle, which lint-imports
does not see. `scripts/import_graph.py` reads every import, those inside functions and under TYPE_CHECKING
too (where the old circle hid), and this holds its picture to none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_kubernetes_backend_has_no_circle_of_files_and_no_import_back_up_its_layers() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_graph.py"), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    picture = json.loads(out.stdout)
    assert picture["layers"] > 0, "the package's layers contract is in pyproject.toml"
    assert picture["circles"] == 0, picture
    assert picture["upward_imports"] == 0, picture
