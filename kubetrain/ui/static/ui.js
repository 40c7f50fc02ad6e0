// kubetrain ui: keeps the server-rendered pages current from server-sent events.
// Every value from a job is put in the page with textContent, never parsed as HTML.
(function () {
  "use strict";

  var body = document.body;
  var csrfMeta = document.querySelector('meta[name="kubetrain-csrf"]');
  var csrf = csrfMeta ? csrfMeta.content : "";
  var MAX_LOG_LINES = 200000;

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function cell(text, className) { return el("td", text, className); }

  function phaseSpan(phase) { return el("span", phase, "phase phase-" + phase); }

  // kubectl's ages, as `kubetrain list` prints them (status_text.format_age).
  function formatAge(seconds) {
    if (seconds === null || seconds === undefined || isNaN(seconds)) return "<unknown>";
    var s = Math.floor(seconds);
    if (s < 0) return "0s";
    if (s < 120) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 10) return s % 60 ? m + "m" + (s % 60) + "s" : m + "m";
    if (m < 180) return m + "m";
    var h = Math.floor(s / 3600);
    if (h < 8) return m % 60 ? h + "h" + (m % 60) + "m" : h + "h";
    if (h < 48) return h + "h";
    if (h < 24 * 8) return h % 24 ? Math.floor(h / 24) + "d" + (h % 24) + "h" : Math.floor(h / 24) + "d";
    return Math.floor(h / 24) + "d";
  }

  function updateAges(root) {
    var now = Date.now() / 1000;
    (root || document).querySelectorAll("td.age[data-created]").forEach(function (td) {
      var created = parseFloat(td.getAttribute("data-created"));
      if (!isNaN(created)) td.textContent = formatAge(now - created);
    });
  }

  var RESTARTED = "the server restarted: reload the page (with the new address if its token changed)";

  function notice(text) {
    var p = document.getElementById("notice");
    if (!p) return;
    p.textContent = text;
    p.hidden = false;
  }

  // An event stream that fails while the server is away retries by itself; one the server refuses (any
  // answer but 200) is closed for good. A refusal is asked about with a cheap request: 403 is the server
  // refusing the page's token, i.e. it restarted with a new one, and only a reload with its address helps.
  function refused() {
    fetch("/static/ui.css", { cache: "no-store", credentials: "same-origin" }).then(function (response) {
      if (response.status === 403) notice(RESTARTED);
      else notice("live updates stopped (the server answered " + response.status + "): reload the page");
    }, function () {
      notice("live updates stopped: the server cannot be reached; reload the page once it runs again");
    });
  }

  function live(source) {
    var dot = document.getElementById("live");
    source.addEventListener("open", function () { if (dot) dot.className = "live on"; });
    source.addEventListener("error", function () {
      if (dot) dot.className = "live";
      if (source.readyState === EventSource.CLOSED) refused();
    });
  }

  // A browser opens at most 6 connections to one host for all of its tabs (HTTP/1.1), and every page's
  // event stream holds one: a tab in the background gives its stream up, so the tabs in front (and new
  // ones) can load; it reopens the stream, and so catches up, when it is shown again.
  function whileVisible(resume, pause) {
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "hidden") {
        pause();
        var dot = document.getElementById("live");
        if (dot) dot.className = "live";
      } else {
        resume();
      }
    });
  }

  // -- the jobs table -------------------------------------------------------------------------------

  function jobRow(job) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-key", job.backend + "/" + job.id);
    var name = cell();
    var a = el("a", job.id);
    a.href = job.href;
    name.appendChild(a);
    tr.appendChild(name);
    tr.appendChild(cell(job.backend + (job.namespace ? " / " + job.namespace : "")));
    tr.appendChild(cell(job.framework || "-"));
    var phase = cell();
    phase.appendChild(phaseSpan(job.phase));
    tr.appendChild(phase);
    tr.appendChild(cell(job.ready + "/" + job.total, "num"));
    tr.appendChild(cell(job.restarts, "num"));
    var age = cell("", "age");
    if (job.created_at !== null) age.setAttribute("data-created", job.created_at);
    tr.appendChild(age);
    return tr;
  }

  // The stream sends only what changed (kubetrain/ui/table_diff.py): the rows that are new or differ, and
  // every row's key in order when the set or order of rows moved. Rows that did not change are not touched.
  function jobsPage() {
    var tbody = document.querySelector("#jobs tbody");
    var rows = {};
    Array.prototype.forEach.call(tbody.rows, function (tr) { rows[tr.getAttribute("data-key")] = tr; });
    var shown = {}; // each row's data as last drawn from the stream (a reopened stream resends every row)
    var source = null;
    function open(address) {
      source = new EventSource(address);
      live(source);
      source.addEventListener("jobs", apply);
    }
    function apply(event) {
      var data = JSON.parse(event.data);
      data.upsert.forEach(function (job) {
        var key = job.backend + "/" + job.id;
        var json = JSON.stringify(job);
        if (shown[key] === json) return;
        shown[key] = json;
        var tr = jobRow(job);
        updateAges(tr);
        if (rows[key]) tbody.replaceChild(tr, rows[key]);
        else tbody.appendChild(tr); // put in its place by the order that comes with a new row
        rows[key] = tr;
      });
      if (data.order) {
        var wanted = {};
        data.order.forEach(function (key) { wanted[key] = true; });
        Object.keys(rows).forEach(function (key) {
          if (!wanted[key]) { tbody.removeChild(rows[key]); delete rows[key]; delete shown[key]; }
        });
        data.order.forEach(function (key, i) {
          var tr = rows[key];
          if (tr && tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
        });
      }
      document.getElementById("count").textContent = String(tbody.rows.length);
      document.getElementById("empty").hidden = tbody.rows.length > 0;
    }
    open(body.getAttribute("data-events"));
    // The page's digest says what was rendered; after a pause the stream starts from every row.
    whileVisible(function () { open("/events"); }, function () { source.close(); });
    updateAges();
    setInterval(updateAges, 5000); // ages tick in the page; nothing is asked of the server
  }

  // -- a job's page -----------------------------------------------------------------------------------

  function fillTable(selector, rows, build) {
    var tbody = document.querySelector(selector + " tbody");
    tbody.replaceChildren.apply(tbody, rows.map(build));
  }

  function renderStatus(d) {
    var phase = document.getElementById("phase");
    phase.textContent = d.row.phase;
    phase.className = "phase phase-" + d.row.phase;
    document.getElementById("ready").textContent = d.row.ready + "/" + d.row.total;
    document.getElementById("restarts").textContent = String(d.row.restarts);
    document.getElementById("message").textContent = d.message || "";
    fillTable("#replicas", d.replicas, function (r) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-replica", r.role + "-" + r.index);
      tr.appendChild(cell(r.role));
      tr.appendChild(cell(r.index, "num"));
      var p = cell();
      p.appendChild(phaseSpan(r.phase));
      tr.appendChild(p);
      tr.appendChild(cell(r.exit || "-"));
      tr.appendChild(cell(r.restarts, "num"));
      tr.appendChild(cell(r.reason || ""));
      return tr;
    });
    fillTable("#conditions", d.conditions, function (c) {
      var tr = document.createElement("tr");
      var when = c.time ? new Date(c.time * 1000).toTimeString().slice(0, 8) : "";
      [c.type, c.status, c.reason || "", when, c.message || ""].forEach(function (v) { tr.appendChild(cell(v)); });
      return tr;
    });
    var pending = document.getElementById("pending");
    pending.replaceChildren.apply(pending, d.pending.map(function (p) {
      var li = el("li");
      li.appendChild(el("b", p.cause));
      li.appendChild(document.createTextNode((p.replicas.length ? " (" + p.replicas.join(", ") + ")" : "") + ": " + p.message));
      li.appendChild(el("div", "hint: " + p.hint, "hint"));
      return li;
    }));
    var failure = document.getElementById("failure");
    var parts = [];
    if (d.failure) {
      parts.push(el("h3", d.failure.final ? "Failure" : "Last failure"));
      parts.push(el("p", d.failure.headline, "headline"));
      if (d.failure.message) parts.push(el("p", d.failure.message));
      if (d.failure.lastLines.length) {
        parts.push(el("p", "last output of " + d.failure.replica + ":", "muted"));
        parts.push(el("pre", d.failure.lastLines.join("\n"), "lastlines"));
      }
    }
    failure.replaceChildren.apply(failure, parts);
    allowed = d.actions;
    enableActions();
  }

  // The actions the job can take now (its last status says), the one in flight (its button stays disabled
  // until a status event shows what it did), and whether the job is gone (nothing can be done any more).
  var allowed = [];
  var acting = null;
  var gone = false;

  function enableActions() {
    document.querySelectorAll("button.action").forEach(function (b) {
      var action = b.getAttribute("data-action");
      b.disabled = gone || (acting !== null && acting.action === action) || allowed.indexOf(action) < 0;
    });
  }

  // A status event after an action's reply says what the action did: the reply's line ("resume: Pending")
  // would otherwise stay beside a job that is Running by now.
  function onStatus(d) {
    if (acting && acting.replied) {
      document.getElementById("action-result").textContent = "";
      acting = null;
    }
    renderStatus(d);
  }

  var ENDED = ["Succeeded", "Failed", "Cancelled"];

  // The job is not there any more (deleted here, from the CLI, or on a cluster by its cancel): the page stops
  // looking alive. A job that had ended keeps its phase (a cancel on a cluster deletes the job it cancelled).
  function jobGone(data) {
    gone = true;
    acting = null;
    var phase = document.getElementById("phase");
    if (ENDED.indexOf(phase.textContent) < 0) {
      // "Deleted" when the server says so; else "Gone" (it may also be a backend that stopped answering).
      var shown = data.deleted === true ? "Deleted" : "Gone";
      phase.textContent = shown;
      phase.className = "phase phase-" + shown;
    }
    document.getElementById("message").textContent = data.message;
    enableActions();
    var dot = document.getElementById("live");
    if (dot) dot.className = "live";
    document.getElementById("log").appendChild(el("div", "— the job is gone: no more output —", "log-end"));
    keepAtEnd();
  }

  var metricVersion = 0;

  // How the plots are drawn now: the x axis and the y scale the page's selects say.
  function plotView() {
    return {
      x: document.getElementById("metric-x").value,
      scale: document.getElementById("metric-scale").value,
    };
  }

  // The name is a query parameter, encoded (pages.plot_src builds the same): `eval/loss`, or a name with
  // `?`, `#`, `%` or a newline, cannot be a path segment.
  function plotSrc(name) {
    var view = plotView();
    var params = new URLSearchParams({ name: name, x: view.x, scale: view.scale, v: String(metricVersion) });
    return body.getAttribute("data-job") + "/plot.svg?" + params.toString();
  }

  // Each plot's image by metric name, and the address each should show (the newest asked for).
  var plots = {};
  var wanted = {};

  function plotImg(name) {
    var img = document.createElement("img");
    img.className = "plot";
    img.setAttribute("data-metric", name);
    img.alt = name;
    return img;
  }

  function redrawPlots() {
    Object.keys(plots).forEach(function (name) {
      wanted[name] = plotSrc(name);
      plots[name].src = wanted[name];
    });
  }

  // A job logging every few milliseconds sends a `metrics` event every 50 ms: redrawing every plot on each
  // would fetch a dozen images a second for a change no one can see. A plot is redrawn at most every
  // PLOT_EVERY ms: the first change after a quiet spell at once, the rest of a burst once at its end (a
  // trailing redraw, so the latest samples are always drawn in the end). A new metric's plot shows at once.
  var PLOT_EVERY = 2000;
  var plotsDrawn = performance.now(); // the page came with its plots drawn
  var plotTimer = 0;

  function refreshPlots() {
    plotTimer = 0;
    plotsDrawn = performance.now();
    Object.keys(plots).forEach(function (name) {
      var src = plotSrc(name);
      if (wanted[name] === src) return;
      wanted[name] = src;
      // The new picture replaces the shown one once loaded, so a growing plot never blinks (one request per
      // redraw: the loaded image is the one shown); unless a newer one was asked for meanwhile, or the axes
      // were changed (that change has drawn the plot already, and this picture is of the old axes).
      var next = plotImg(name);
      next.alt = plots[name].alt;
      var view = JSON.stringify(plotView());
      next.onload = function () {
        if (wanted[name] !== src || JSON.stringify(plotView()) !== view) return;
        var shown = plots[name];
        if (shown.parentNode) shown.parentNode.replaceChild(next, shown);
        plots[name] = next;
      };
      next.src = src;
    });
  }

  function renderMetrics(d) {
    metricVersion = d.version;
    var box = document.getElementById("metrics");
    d.names.forEach(function (name) {
      if (plots[name]) return;
      var img = plotImg(name);
      wanted[name] = img.src = plotSrc(name);
      plots[name] = img;
      box.appendChild(img);
    });
    document.getElementById("no-metrics").hidden = d.names.length > 0;
    if (!plotTimer) {
      plotTimer = setTimeout(refreshPlots, Math.max(0, plotsDrawn + PLOT_EVERY - performance.now()));
    }
  }

  // The page's one event stream: status, metrics and the log, with the log's filters as its parameters
  // (a browser holds at most 6 connections to one host for all its tabs, so a page holds one).
  var source = null;
  var logLines = 0;

  // The log's chunks sit in one block inside the box, watched for its size: it grows with every chunk, and
  // also when a chunk laid out at its placeholder size takes its real one (below). Whatever moves the bottom
  // of the log, a follower is taken back to it.
  var logLinesBox = null;
  var logGrown = typeof ResizeObserver === "function" ? new ResizeObserver(function () { keepAtEnd(); }) : null;

  function resetLog() {
    logLinesBox = el("div", null, "lines");
    document.getElementById("log").replaceChildren(logLinesBox);
    if (logGrown) {
      logGrown.disconnect();
      logGrown.observe(logLinesBox);
    }
    document.getElementById("log-error").hidden = true;
    document.getElementById("log-count").textContent = "";
    logLines = 0;
  }

  function appendLines(lines) {
    var block = logLinesBox;
    // One text block per batch: ten thousand lines are a handful of nodes, not ten thousand.
    var text = lines.map(function (l) { return "[" + l[0] + "] " + l[2]; }).join("\n");
    block.appendChild(el("pre", text, "chunk"));
    logLines += lines.length;
    while (logLines > MAX_LOG_LINES && block.firstChild) {
      logLines -= block.firstChild.textContent.split("\n").length;
      block.removeChild(block.firstChild);
    }
    document.getElementById("log-count").textContent = logLines + " lines";
    keepAtEnd();
  }

  // "keep at the end". A chunk out of view is laid out at its placeholder size (ui.css: content-visibility),
  // and takes its real size only once it is rendered near the view, a frame or two later (or when the page
  // is scrolled to show the box): scrolling to scrollHeight right after an append stops short, because the
  // bottom moves down when the chunks brought into view render. So the box is scrolled after layout, in
  // animation frames, again until it has stayed at its end with nothing growing for a few frames (at most
  // STICK_FRAMES; every append, and every growth the observer above sees, starts the count over). Appends
  // within one frame cost one scroll.
  var STICK_FRAMES = 120;
  var STILL_FRAMES = 3;
  var stickLeft = 0;
  var stickStill = 0;
  var stickFrame = 0;
  var stickHeight = -1;

  function atEnd(box) { return box.scrollTop + box.clientHeight >= box.scrollHeight - 2; }

  function keepAtEnd() {
    if (!document.getElementById("log-follow").checked) return;
    stickLeft = STICK_FRAMES;
    stickStill = 0;
    stickHeight = -1;
    if (!stickFrame) stickFrame = requestAnimationFrame(stick);
  }

  function stick() {
    stickFrame = 0;
    var box = document.getElementById("log");
    if (!document.getElementById("log-follow").checked) return;
    var height = box.scrollHeight;
    if (atEnd(box) && height === stickHeight) {
      stickStill += 1;
    } else {
      stickStill = 0;
      box.scrollTop = height;
    }
    stickHeight = height;
    if (stickStill < STILL_FRAMES && --stickLeft > 0) stickFrame = requestAnimationFrame(stick);
  }

  // A scroll up by hand pauses following (the box is unchecked), so the next lines do not pull the view away
  // from what is being read; checking it again jumps to the end. The wheel and the keys say their direction
  // and pause at once (before the next frame's scroll to the end could undo them); a drag of the scrollbar,
  // a selection or a touch pauses once it has moved the view up, away from the end. Scrolls of the page's own,
  // and of the browser's (keeping the view in place while chunks take their real size), pause nothing.
  function followLog() {
    var box = document.getElementById("log");
    var follow = document.getElementById("log-follow");
    var held = { pointer: false, touch: false };
    var lastTop = 0;
    function pause() {
      if (box.scrollHeight > box.clientHeight) follow.checked = false;
    }
    box.addEventListener("wheel", function (event) { if (event.deltaY < 0) pause(); }, { passive: true });
    box.addEventListener("keydown", function (event) {
      if (/^(ArrowUp|PageUp|Home)$/.test(event.key) || (event.key === " " && event.shiftKey)) pause();
    });
    box.addEventListener("pointerdown", function () { held.pointer = true; });
    box.addEventListener("touchstart", function () { held.touch = true; }, { passive: true });
    ["pointerup", "pointercancel"].forEach(function (type) {
      document.addEventListener(type, function () { held.pointer = false; });
    });
    ["touchend", "touchcancel"].forEach(function (type) {
      document.addEventListener(type, function () { held.touch = false; });
    });
    box.addEventListener("scroll", function () {
      var up = box.scrollTop < lastTop;
      lastTop = box.scrollTop;
      if (up && (held.pointer || held.touch) && !atEnd(box)) follow.checked = false;
    }, { passive: true });
    follow.addEventListener("change", function () {
      if (follow.checked) {
        box.scrollTop = box.scrollHeight;
        keepAtEnd();
      }
    });
  }

  function logError(message) {
    var error = document.getElementById("log-error");
    error.textContent = message;
    error.hidden = false;
  }

  // (Re)opened when a log filter changes: the server then reads the log again with the new filters.
  function openStream() {
    if (gone) return; // nothing more will come: the page stays as the job was last seen
    var form = document.getElementById("log-filters");
    var params = new URLSearchParams();
    ["role", "index", "grep", "tail"].forEach(function (k) {
      var v = form.elements[k].value;
      if (v !== "") params.set(k, v);
    });
    if (source) source.close();
    resetLog();
    var query = params.toString();
    var stream = new EventSource(body.getAttribute("data-events") + (query ? "?" + query : ""));
    source = stream;
    live(stream);
    // Every connection sends the log from its start: after a reconnect, the page starts it over.
    stream.addEventListener("open", resetLog);
    stream.addEventListener("status", function (event) { onStatus(JSON.parse(event.data)); });
    stream.addEventListener("metrics", function (event) { renderMetrics(JSON.parse(event.data)); });
    stream.addEventListener("lines", function (event) { appendLines(JSON.parse(event.data)); });
    stream.addEventListener("end", function () {
      document.getElementById("log").appendChild(el("div", "— end of output —", "log-end"));
      keepAtEnd();
    });
    stream.addEventListener("failed", function (event) { logError(JSON.parse(event.data).message); });
    stream.addEventListener("gone", function (event) {
      stream.close();
      source = null;
      jobGone(JSON.parse(event.data));
    });
  }

  function act(button) {
    var action = button.getAttribute("data-action");
    var job = body.getAttribute("data-id");
    if (!window.confirm(action + " job " + job + "?\n" + button.title)) return;
    var result = document.getElementById("action-result");
    result.textContent = action + "…";
    var mine = acting = { action: action, replied: false };
    enableActions();
    function failed(text) {
      if (acting === mine) acting = null;
      result.textContent = text;
      enableActions();
    }
    fetch(body.getAttribute("data-job") + "/" + action, {
      method: "POST",
      headers: { "X-Kubetrain-CSRF": csrf },
      credentials: "same-origin",
    }).then(function (response) {
      // Read as text first: a refusal may be plain text (a 403 from the server's guard, or its token page
      // after it restarted), and is shown as the server said it, not as a JSON parser's complaint.
      return response.text().then(function (text) {
        var data = null;
        try { data = JSON.parse(text); } catch (err) { data = null; }
        if (!response.ok) {
          failed((data && data.error) || text.trim() || response.statusText || "HTTP " + response.status);
          // 403 to a page of this server: its token or this page's CSRF token is refused, so it restarted.
          if (response.status === 403) notice(RESTARTED);
          return;
        }
        if (!data || typeof data.phase !== "string") { failed(text.trim() || response.statusText); return; }
        result.textContent = action + ": " + data.phase;
        if (action === "delete") { window.location.href = "/"; return; }
        if (acting === mine) mine.replied = true;
        // The backend's answer is the job's state now (on a cluster a cancelled job is then deleted, and
        // no later status event may come to say it).
        var phase = document.getElementById("phase");
        phase.textContent = data.phase;
        phase.className = "phase phase-" + data.phase;
      });
    }).catch(function (err) { failed(String(err)); });
  }

  function jobPage() {
    document.querySelectorAll("button.action").forEach(function (b) {
      if (!b.disabled) allowed.push(b.getAttribute("data-action"));
    });
    document.querySelectorAll("#metrics img.plot").forEach(function (img) {
      var name = img.getAttribute("data-metric");
      plots[name] = img;
      wanted[name] = img.getAttribute("src");
    });
    document.getElementById("metric-x").addEventListener("change", redrawPlots);
    document.getElementById("metric-scale").addEventListener("change", redrawPlots);
    followLog();
    document.getElementById("log-filters").addEventListener("submit", function (event) {
      event.preventDefault();
      openStream();
    });
    document.querySelectorAll("button.action").forEach(function (b) {
      b.addEventListener("click", function () { act(b); });
    });
    openStream();
    whileVisible(openStream, function () { if (source) source.close(); });
  }

  if (body.getAttribute("data-page") === "jobs") jobsPage();
  if (body.getAttribute("data-page") === "job") jobPage();
})();
