"""docs/parity.md, generated from the table so the page cannot drift from it:
`python -m kubetrain.parity --markdown` prints it (as `python -m kubetrain.frameworks.controllers` prints
docs/foreign.md's tables); `tests/test_parity.py` fails when the page is not what this makes."""

from __future__ import annotations

from .cells import BACKENDS, IGNORED, VERDICTS
from .table import ROWS

REGENERATE = "python -m kubetrain.parity --markdown > docs/parity.md"


def markdown() -> str:
    """docs/parity.md: the table, by section."""
    lines = [
        "# Same meaning on every backend",
        "",
        f"<!-- generated from kubetrain/parity/table.py: {REGENERATE} -->",
        "",
        "A field kubetrain accepts takes effect, or is refused with its path (naming the backends that can), or",
        "is honoured approximately with a warning that says how. This table is that contract, field by field;",
        "`tests/test_parity.py` holds it to the code (it renders every flavor and dry-runs the local backend for",
        "a sample of each row) and fails on a field of the JSON Schema that has no row. `kubetrain validate FILE",
        "--backend local|kubernetes [--flavor F]` reports, before anything runs, every refusal and warning a job",
        "meets.",
        "",
        "- ✓: honoured; ✓ (the default): what it asks for is what the backend does anyway.",
        "- refused: the backend refuses the job, naming the field's path and the backends that can run it.",
        "- approximated: it runs, with a warning that says how.",
        "- not used: it has no meaning on that backend; the job runs, and a warning names the field and why",
        "  (at run time and in `kubetrain validate`).",
        "",
        "A role's setting (`spec.roles.<role>.image`) means what the job's does, at the role's path.",
        "",
        _counts_table(),
    ]
    section = None
    for r in ROWS:
        if r.section != section:
            section = r.section
            lines += ["", f"## {section}", "", "| field | " + " | ".join(BACKENDS) + " |",
                      "|---|" + "---|" * len(BACKENDS)]
        name = f"`{r.field}`" + (f" = `{r.when}`" if r.when else "")
        cells = [_escape(r.cell(b).text() + (f"; a role's: {r.role[b].text()}" if b in r.role else ""))
                 for b in BACKENDS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    unchecked = [(r, b) for r in ROWS for b in BACKENDS if r.cell(b).unchecked]
    if unchecked:
        lines += ["", "## Cells the tests cannot check", ""]
        lines += [f"- `{r.key}` on {b}: {r.cell(b).unchecked}" for r, b in unchecked]
    return "\n".join(lines) + "\n"


def counts() -> dict[str, dict[str, int]]:
    """backend → verdict → rows."""
    return {b: {v: sum(1 for r in ROWS if r.cell(b).verdict == v) for v in VERDICTS} for b in BACKENDS}


def _counts_table() -> str:
    table = counts()
    lines = ["| rows | " + " | ".join(BACKENDS) + " |", "|---|" + "---|" * len(BACKENDS)]
    for verdict in VERDICTS:
        label = "not used (warned)" if verdict == IGNORED else verdict
        lines.append(f"| {label} | " + " | ".join(str(table[b][verdict]) for b in BACKENDS) + " |")
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


__all__ = ["REGENERATE", "counts", "markdown"]
