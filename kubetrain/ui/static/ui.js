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

  function live(source) {
    var dot = document.getElementById("live");
    source.addEventListener("open", function () { if (dot) dot.className = "live on"; });
    source.addEventListener("error", function () { if (dot) dot.className = "live"; });
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
    document.querySelectorAll("button.action").forEach(function (b) {
      b.disabled = d.actions.indexOf(b.getAttribute("data-action")) < 0;
    });
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

  function redrawPlots() {
    document.querySelectorAll("#metrics img.plot").forEach(function (img) {
      img.src = plotSrc(img.getAttribute("data-metric"));
    });
  }

  function renderMetrics(d) {
    metricVersion = d.version;
    var box = document.getElementById("metrics");
    var have = {};
    box.querySelectorAll("img.plot").forEach(function (img) { have[img.getAttribute("data-metric")] = img; });
    d.names.forEach(function (name) {
      var img = have[name];
      if (!img) {
        img = document.createElement("img");
        img.className = "plot";
        img.setAttribute("data-metric", name);
        img.alt = name;
        box.appendChild(img);
      }
      // Replaced only once the new picture has loaded, so a growing plot never blinks; unless the axes were
      // changed meanwhile (that change has drawn the plot already, and this picture is of the old axes).
      var next = new Image();
      var src = plotSrc(name);
      var view = JSON.stringify(plotView());
      next.onload = function () { if (JSON.stringify(plotView()) === view) img.src = src; };
      next.src = src;
    });
    document.getElementById("no-metrics").hidden = d.names.length > 0;
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
    stream.addEventListener("status", function (event) { renderStatus(JSON.parse(event.data)); });
    stream.addEventListener("metrics", function (event) { renderMetrics(JSON.parse(event.data)); });
    stream.addEventListener("lines", function (event) { appendLines(JSON.parse(event.data)); });
    stream.addEventListener("end", function () {
      document.getElementById("log").appendChild(el("div", "— end of output —", "log-end"));
      keepAtEnd();
    });
    stream.addEventListener("failed", function (event) { logError(JSON.parse(event.data).message); });
    stream.addEventListener("gone", function (event) {
      stream.close();
      document.getElementById("message").textContent = JSON.parse(event.data).message;
    });
  }

  function act(button) {
    var action = button.getAttribute("data-action");
    var job = body.getAttribute("data-id");
    if (!window.confirm(action + " job " + job + "?\n" + button.title)) return;
    var result = document.getElementById("action-result");
    result.textContent = action + "…";
    fetch(body.getAttribute("data-job") + "/" + action, {
      method: "POST",
      headers: { "X-Kubetrain-CSRF": csrf },
      credentials: "same-origin",
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { result.textContent = data.error || response.statusText; return; }
        result.textContent = action + ": " + data.phase;
        if (action === "delete") { window.location.href = "/"; return; }
        // The backend's answer is the job's state now (on a cluster a cancelled job is then deleted, and
        // no later status event may come to say it).
        var phase = document.getElementById("phase");
        phase.textContent = data.phase;
        phase.className = "phase phase-" + data.phase;
      });
    }).catch(function (err) { result.textContent = String(err); });
  }

  function jobPage() {
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
