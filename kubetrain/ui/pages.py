"""The pages as server-rendered HTML: one layout for every address (`SHELL`), and the content the page's
script asks for with its token: the jobs table and a job's page.

Every value that comes from a job (names, reasons, messages, replicas' output, the spec) goes through
`html.escape`; the script that updates the page later builds its nodes with `textContent` only. The
pages load no third-party asset: one stylesheet and one script of kubetrain's own, from `/static/`.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote, urlencode

from ..status_text import format_age
from .views import ACTIONS, JobDetail, JobRow

ACTION_HELP = {
    "cancel": "Stop the replicas; the job ends Cancelled.",
    "suspend": "Stop the replicas and keep the job, to resume later.",
    "resume": "Start the suspended job again.",
    "delete": "Delete the job and its logs (cancels it first if it runs).",
}


def _e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


SHELL = (
    "<!doctype html>\n"
    '<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    "<title>kubetrain</title>"
    '<link rel="stylesheet" href="/static/ui.css">'
    '<script src="/static/ui.js" defer></script></head>'
    "<body>"
    '<header class="top"><a class="brand" href="/">kubetrain</a>'
    '<span id="live" class="live" title="live updates">●</span></header>'
    # Said when the page has no token, or its server no longer takes it (restarted with a new one): ui.js.
    '<main><p id="notice" class="notice" role="alert" hidden></p><div id="view"></div></main></body></html>'
)
"""What every page address answers, to anyone (no token needed: a browser opening an address cannot send a
header): the layout and the script, nothing of any job. The script takes the token from the address's
fragment or the origin's storage and asks for the page's content (`GET {page}/content`) with it."""


def _view(title: str, body: str, *, view: str, data: dict[str, str] | None = None) -> str:
    """A page's content, put in the layout by the script: its root says what it shows (`data-view`), its
    title, and where its live updates come from (`data-events`)."""
    attrs = "".join(f' data-{k}="{_e(v)}"' for k, v in (data or {}).items())
    return f'<div class="view" data-view="{_e(view)}" data-title="{_e(title)}"{attrs}>{body}</div>'


def _phase(phase: str, element_id: str | None = None) -> str:
    ident = f' id="{_e(element_id)}"' if element_id else ""
    return f'<span{ident} class="phase phase-{_e(phase)}">{_e(phase)}</span>'


def job_row_html(row: JobRow, now: float) -> str:
    age = format_age(None if row.created_at is None else now - row.created_at)
    return (
        f'<tr data-key="{_e(row.backend)}/{_e(row.id)}">'
        f'<td><a href="{_e(row.href)}">{_e(row.id)}</a></td>'
        f"<td>{_e(row.backend)}{' / ' + _e(row.namespace) if row.namespace else ''}</td>"
        f"<td>{_e(row.framework or '-')}</td>"
        f"<td>{_phase(row.phase)}</td>"
        f'<td class="num">{row.ready}/{row.total}</td>'
        f'<td class="num">{row.restarts}</td>'
        f'<td class="age" data-created="{_e(row.created_at or "")}">{_e(age)}</td>'
        "</tr>"
    )


def jobs_page(rows: Sequence[JobRow], backends: Sequence[str], errors: Iterable[str] = (), digest: str = "") -> str:
    """The jobs table; `digest` (`table_diff.rows_digest` of `rows`) goes to the live stream, which then
    sends only what changed since this page was rendered."""
    now = _time.time()
    body = [
        '<h1>Jobs <small id="count">',
        _e(len(rows)),
        "</small></h1>",
        f'<p class="muted">backends: {_e(", ".join(backends))}</p>',
        *(f'<p class="error">{_e(e)}</p>' for e in errors),
        '<table id="jobs" class="grid"><thead><tr><th>name</th><th>backend</th><th>framework</th><th>phase</th>'
        "<th>replicas</th><th>restarts</th><th>age</th></tr></thead><tbody>",
        *(job_row_html(r, now) for r in rows),
        "</tbody></table>",
        f'<p id="empty" class="muted"{"" if not rows else " hidden"}>No jobs yet: kubetrain run ...</p>',
    ]
    events = "/events" + (f"?have={quote(digest)}" if digest else "")
    return _view("jobs", "".join(body), view="jobs", data={"events": events})


def replicas_html(replicas: Sequence[dict[str, object]]) -> str:
    rows = "".join(
        f'<tr data-replica="{_e(r["role"])}-{_e(r["index"])}">'
        f'<td>{_e(r["role"])}</td><td class="num">{_e(r["index"])}</td>'
        f"<td>{_phase(str(r['phase']))}</td><td>{_e(r['exit'] or '-')}</td>"
        f'<td class="num">{_e(r["restarts"])}</td><td>{_e(r["reason"] or "")}</td></tr>'
        for r in replicas
    )
    return rows


def conditions_html(conditions: Sequence[dict[str, object]]) -> str:
    out = []
    for c in conditions:
        t = c.get("time")
        stamp = _time.strftime("%H:%M:%S", _time.localtime(float(t))) if isinstance(t, int | float) else ""
        out.append(
            f"<tr><td>{_e(c['type'])}</td><td>{_e(c['status'])}</td><td>{_e(c['reason'] or '')}</td>"
            f"<td>{_e(stamp)}</td><td>{_e(c['message'] or '')}</td></tr>"
        )
    return "".join(out)


def pending_html(pending: Sequence[dict[str, object]]) -> str:
    return "".join(
        f"<li><b>{_e(d['cause'])}</b>"
        f"{' (' + _e(', '.join(str(x) for x in d['replicas'])) + ')' if d['replicas'] else ''}: "  # type: ignore[attr-defined]
        f'{_e(d["message"])}<div class="hint">hint: {_e(d["hint"])}</div></li>'
        for d in pending
    )


def failure_html(failure: dict[str, object] | None) -> str:
    if failure is None:
        return ""
    title = "Failure" if failure.get("final") else "Last failure"
    lines = failure.get("lastLines") or []
    last = "\n".join(str(x) for x in lines) if isinstance(lines, list) else ""
    message = f"<p>{_e(failure['message'])}</p>" if failure.get("message") else ""
    out = f'<h3>{_e(title)}</h3><p class="headline">{_e(failure["headline"])}</p>{message}'
    if last:
        out += f'<p class="muted">last output of {_e(failure["replica"])}:</p><pre class="lastlines">{_e(last)}</pre>'
    return out


def plot_src(href: str, name: str, x: str, scale: str, version: int) -> str:
    """A plot's address. The metric's name is a query parameter, encoded: names such as `eval/loss` or ones
    holding `?`, `#`, `%`, spaces or a newline cannot be a path segment (ui.js `plotSrc` builds the same)."""
    return f"{href}/plot.svg?" + urlencode({"name": name, "x": x, "scale": scale, "v": version})


def metric_img(href: str, name: str, x: str, version: int, scale: str = "linear") -> str:
    """A plot: the script fetches its picture from `data-src` with the page's token (an `<img src>` cannot
    send a header) and shows it from a `blob:` address."""
    src = plot_src(href, name, x, scale, version)
    return f'<img class="plot" data-metric="{_e(name)}" alt="{_e(name)} by {_e(x)}" data-src="{_e(src)}">'


def job_page(detail: JobDetail, spec: str, metric_names: Sequence[str], metric_version: int) -> str:
    row = detail.row
    href = row.href
    actions = "".join(
        f'<button type="button" class="action" data-action="{a}" title="{_e(ACTION_HELP[a])}"'
        f"{'' if a in detail.actions else ' disabled'}>{a}</button>"
        for a in ACTIONS
    )
    role_options = "".join(f'<option value="{_e(r)}">{_e(r)}</option>' for r in detail.roles)
    plots = "".join(metric_img(href, n, "step", metric_version) for n in metric_names)
    body = f"""
<nav class="crumbs"><a href="/">jobs</a> / {_e(row.id)}</nav>
<section class="head">
  <h1>{_e(row.id)} {_phase(row.phase, "phase")}</h1>
  <p class="muted">{_e(row.backend)}{" / " + _e(row.namespace) if row.namespace else ""} ·
    framework <span id="framework">{_e(row.framework or "-")}</span> ·
    replicas <span id="ready">{row.ready}/{row.total}</span> ·
    restarts <span id="restarts">{row.restarts}</span></p>
  <p id="message" class="message">{_e(detail.message or "")}</p>
  <div class="actions">{actions}<span id="action-result" class="muted" role="status"></span></div>
</section>
<section><h2>Replicas</h2>
  <table id="replicas" class="grid"><thead><tr><th>role</th><th>index</th><th>phase</th><th>exit</th>
  <th>restarts</th><th>reason</th></tr></thead><tbody>{replicas_html(detail.replicas)}</tbody></table>
  <ul id="pending" class="pending">{pending_html(detail.pending)}</ul>
  <div id="failure" class="failure">{failure_html(detail.failure)}</div>
</section>
<section><h2>Metrics <select id="metric-x" aria-label="x axis"><option value="step">by step</option>
  <option value="time">by time</option></select>
  <select id="metric-scale" aria-label="y axis scale"><option value="linear">linear</option>
  <option value="log">log</option></select></h2>
  <div id="metrics" class="plots" data-version="{metric_version}">{plots}</div>
  <p id="no-metrics" class="muted"{" hidden" if metric_names else ""}>No metrics yet
  (kubetrain.metrics.log(step=..., loss=...) in the training script).</p>
</section>
<section><h2>Logs <small id="log-count" class="muted"></small></h2>
  <form id="log-filters" class="filters">
    <label>role <select name="role"><option value="">all</option>{role_options}</select></label>
    <label>index <input name="index" type="number" min="0" size="4"></label>
    <label>grep <input name="grep" type="text" placeholder="regex"></label>
    <label>tail <input name="tail" type="number" min="0" size="6" placeholder="all"></label>
    <button type="submit">apply</button>
    <label><input id="log-follow" type="checkbox" checked> keep at the end</label>
  </form>
  <p id="log-error" class="error" hidden></p>
  <div id="log" class="log" tabindex="0"></div>
</section>
<section><details><summary>Spec</summary><pre id="spec" class="spec">{_e(spec)}</pre></details></section>
<section><h2>Conditions</h2>
  <table id="conditions" class="grid"><thead><tr><th>type</th><th>status</th><th>reason</th><th>time</th>
  <th>message</th></tr></thead><tbody>{conditions_html(detail.conditions)}</tbody></table>
</section>"""
    return _view(row.id, body, view="job", data={"id": row.id, "job": href, "events": f"{href}/events"})


def message_page(title: str, text: str) -> str:
    return _view(title, f'<h1>{_e(title)}</h1><p>{_e(text)}</p><p><a href="/">jobs</a></p>', view="message")


__all__ = ["SHELL", "job_page", "jobs_page", "message_page"]
