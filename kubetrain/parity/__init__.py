"""The parity contract: what every field of a TrainJob does on every backend, in one table.

A field kubetrain accepts takes effect, or is refused with its path (naming the backends that can), or is
honoured approximately with a warning that says how. `ROWS` holds, for every field of the TrainJob JSON
Schema (`kubetrain.jobspec.schema.full_json_schema`), and for the values that change the verdict, one
`Cell` per backend (`BACKENDS`: local and the four Kubernetes flavors):

- `honoured` (✓): it takes effect (`same=True`: what it asks for is what the backend does anyway);
- `refused`: the backend raises a field-pathed problem (a render problem on Kubernetes);
- `approximated`: it takes effect approximately, and a warning says how;
- `ignored`: it has no meaning on that backend (an image or a node selector on this machine); the backend
  runs the job and warns, naming the fields and why (`unused_warnings`), as `kubetrain validate` does.

Each row carries a sample (assignments over `BASE`, a small job every backend runs) so the tests can hold
the table to the code (tests/support/parity.py): a refused cell must produce a problem at the row's path, an
honoured one none and a change of what would run (manifests, launch record) against the row's baseline, an
approximated one a warning naming the path. Cells the tests cannot check say why (`unchecked`).

The modules: `cells` (the vocabulary: `Cell`, `Row`, the samples), `table` (`ROWS`), `lookup` (what a job
sets, the fields a backend does not use), `markdown` (docs/parity.md: `python -m kubetrain.parity
--markdown`). Data and pure functions, below the backends: the local backend reads the table, and it imports
no backend.
"""

from __future__ import annotations

from .cells import (
    APPROXIMATED,
    BACKENDS,
    BASE,
    DELETE,
    HONOURED,
    IGNORED,
    KUBERNETES,
    REFUSED,
    VERDICTS,
    Cell,
    Row,
    approx,
    assign,
    baseline_document,
    ignored,
    ok,
    refused,
    same,
    sample_document,
)
from .lookup import rows_for, set_fields, unused_warnings
from .table import ROWS, row_of

__all__ = [
    "APPROXIMATED",
    "BACKENDS",
    "BASE",
    "DELETE",
    "HONOURED",
    "IGNORED",
    "KUBERNETES",
    "REFUSED",
    "ROWS",
    "VERDICTS",
    "Cell",
    "Row",
    "approx",
    "assign",
    "baseline_document",
    "ignored",
    "ok",
    "refused",
    "row_of",
    "rows_for",
    "same",
    "sample_document",
    "set_fields",
    "unused_warnings",
]
