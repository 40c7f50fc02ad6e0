"""The pages as server-rendered HTML: one layout for every address (`SHELL`), and the content the page's
script asks for with its token: the jobs table and a job's page, and the pieces of both that live updates
replace (`fragments`).

One renderer: Jinja2 templates (`templates/`) with autoescape, for the first load and for every update the
server sends, so a piece looks the same whichever way it came and every value from a job (names, reasons,
messages, replicas' output, the spec) is escaped in one place. The page's script places the pieces it is
sent; it renders only what streams in as data (log lines, plots) and the text of times, which changes with
the clock (ages, durations, clock times in the reader's time zone): the one formatter of times is there.
The pages load nothing from elsewhere: kubetrain's stylesheet and script, and the charting library uPlot
(shipped in the package with its licence), all from `/static/`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2

from . import job_list
from .views import ACTIONS, JobDetail

TEMPLATES = Path(__file__).with_name("templates")

ACTION_HELP = {
    "cancel": "Stop the replicas; the job ends Cancelled.",
    "suspend": "Stop the replicas and keep the job, to resume later.",
    "resume": "Start the suspended job again.",
    "delete": "Delete the job and its logs (cancels it first if it runs).",
}

COLUMNS = ("name", "phase", "replicas", "restarts", "created", "started", "ended", "duration", "backend",
           "framework", "reason")  # fmt: skip
"""The jobs table's columns, in the order of `fragments.html`'s `job_row` cells (each a sort key)."""


def _iso(t: float) -> str:
    """A `<time datetime>`: machine-readable, in UTC (the script writes what a person reads)."""
    return datetime.fromtimestamp(float(t), UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template is HTML: every value is escaped unless a template says otherwise
    undefined=jinja2.StrictUndefined,  # a misspelt name fails a test, not a page silently
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["iso"] = _iso

SHELL = (
    "<!doctype html>\n"
    '<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    "<title>kubetrain</title>"
    '<link rel="stylesheet" href="/static/uplot.min.css">'
    '<link rel="stylesheet" href="/static/ui.css">'
    # uPlot (static/uplot.LICENSE), shipped in the package: the page works offline and loads nothing foreign.
    '<script src="/static/uplot.iife.min.js" defer></script>'
    '<script src="/static/ui.js" defer></script></head>'
    "<body>"
    '<header class="top"><a class="brand" href="/">kubetrain</a>'
    '<span id="live" class="live" role="img" aria-label="live updates: off" title="live updates">●</span></header>'
    # Said when the page has no token, or its server no longer takes it (restarted with a new one): ui.js.
    '<main><p id="notice" class="notice" role="alert" hidden></p><div id="view"></div></main></body></html>'
)
"""What every page address answers, to anyone (no token needed: a browser opening an address cannot send a
header): the layout and the script, nothing of any job. The script takes the token from the address's
fragment or the origin's storage and asks for the page's content (`GET {page}/content`) with it."""


def warm() -> None:
    """Compile the templates now (a few hundred ms on a slow machine), at the server's start rather than in
    its first page's answer."""
    for name in ("fragments.html", "jobs.html", "job.html", "message.html"):
        ENV.get_template(name)


def _fragments() -> Any:
    return ENV.get_template("fragments.html").module


def _html(markup: object) -> str:
    return str(markup).strip()


# -- the jobs table -------------------------------------------------------------------------------------


def job_row_html(row: Mapping[str, Any]) -> str:
    """One row of the jobs table (`row`: `JobRow.to_json()`, as the live stream diffs it)."""
    return _html(_fragments().job_row(row))


def jobs_summary_html(page: job_list.ListPage) -> str:
    """What the table says under its rows: which of how many, the pages, or why it is empty."""
    return _html(_fragments().jobs_summary(page))


def jobs_page(page: job_list.ListPage, backends: Sequence[str], errors: Iterable[str], events: str) -> str:
    """The jobs table's content: `page` (`job_list.select`), and the address of its live stream."""
    return ENV.get_template("jobs.html").render(
        page=page,
        rows=[r.to_json() for r in page.rows],
        backends=list(backends),
        errors=list(errors),
        events=events,
        phases=job_list.PHASES,
        per_page=job_list.PER_PAGE,
        sorts=job_list.SORTS,
        default_sort=job_list.DEFAULT_SORT,
        columns=COLUMNS,
    )


# -- a job -------------------------------------------------------------------------------------------------


def status_fragments(detail: JobDetail) -> dict[str, str]:
    """The job page's pieces that its status replaces, by the id of the element each fills."""
    data = detail.to_json()
    f = _fragments()
    return {
        "job-head": _html(f.job_head(data)),
        "replica-rows": _html(f.replica_rows(data["replicas"])),
        "pending": _html(f.pending_items(data["pending"])),
        "failure": _html(f.failure(data["failure"])),
        "condition-rows": _html(f.condition_rows(data["conditions"])),
        "no-metrics": _html(f.no_metrics(detail.row.phase)),
    }


def plot_src(href: str, name: str, x: str, scale: str, version: int) -> str:
    """A plot's address. The metric's name is a query parameter, encoded: names such as `eval/loss` or ones
    holding `?`, `#`, `%`, spaces or a newline cannot be a path segment (ui.js `plotSrc` builds the same)."""
    return f"{href}/plot.svg?" + urlencode({"name": name, "x": x, "scale": scale, "v": version})


LOG_FIELDS = ("role", "index", "grep", "tail", "ts")
PLOT_FIELDS = {"x": ("step", "time"), "scale": ("linear", "log")}


def job_page(
    detail: JobDetail,
    spec: str,
    metric_names: Sequence[str],
    metric_version: int,
    query: Mapping[str, str] | None = None,
) -> str:
    """A job's page. `query`: the page address's query, which holds the log's filters and the plots' axes
    (a reload or a link shows the same view), filled into the page's controls."""
    params = dict(query or {})
    log = {k: params.get(k, "") for k in LOG_FIELDS}
    plot = {k: v if (v := params.get(k, "")) in choices else choices[0] for k, choices in PLOT_FIELDS.items()}
    href = detail.row.href
    # The script says in each plot's alt what it shows (its axes change without a new page).
    plots = [{"name": n, "src": plot_src(href, n, plot["x"], plot["scale"], metric_version)} for n in metric_names]
    return ENV.get_template("job.html").render(
        detail=detail.to_json() | {"roles": list(detail.roles)},
        spec=spec,
        plots=plots,
        plot=plot,
        log=log,
        metric_version=metric_version,
        actions=ACTIONS,
        action_help=ACTION_HELP,
    )


def message_page(title: str, text: str) -> str:
    return ENV.get_template("message.html").render(title=title, text=text)


__all__ = [
    "COLUMNS",
    "ENV",
    "SHELL",
    "job_page",
    "job_row_html",
    "jobs_page",
    "jobs_summary_html",
    "message_page",
    "status_fragments",
    "warm",
]
