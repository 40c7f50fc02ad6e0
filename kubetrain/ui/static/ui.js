// kubetrain ui: fills the page layout with its content and keeps it current from server-sent events.
// Every value from a job is put in the page with textContent, never parsed as HTML (the content's HTML is the
// server's, with every value escaped there).
//
// The key to the page: the address kubetrain ui prints carries the token after `#` (a browser never sends
// that part). This script keeps it in the origin's storage (an origin is scheme, host and port: another
// server on this machine has another origin and cannot read it), removes it from the address bar, and sends
// it in a header with every request: a browser sends no header of a page's own to any other server, where a
// cookie would go to every port of 127.0.0.1.
(function () {
  "use strict";

  var MAX_LOG_LINES = 200000;
  var TOKEN_KEY = "kubetrain-token";
  var NO_TOKEN = "This page needs its key: open the address kubetrain ui printed at start (it ends with #token=…).";
  var RESTARTED = "the server restarted with a new token: open the address it printed at start";

  // The page's content root, once loaded: its data-* attributes say what it shows (pages.py `_view`).
  var view = null;

  function attr(name) { return view ? view.getAttribute("data-" + name) : null; }

  // -- the token ---------------------------------------------------------------------------------------

  var kept = null; // where the origin's storage is refused (a sandbox, a browser setting): this page only

  function storedToken() {
    try { return window.localStorage.getItem(TOKEN_KEY) || kept; } catch (err) { return kept; }
  }

  function keepToken(token) {
    kept = token;
    try { window.localStorage.setItem(TOKEN_KEY, token); } catch (err) { /* kept for this page only */ }
  }

  // The token out of the address (`#token=...`), into the origin's storage; the address bar and the history
  // entry keep the address without it.
  function takeToken() {
    var params = new URLSearchParams(window.location.hash.slice(1));
    var token = params.get("token");
    if (token === null) return;
    if (/^[A-Za-z0-9_-]+$/.test(token)) keepToken(token);
    params.delete("token");
    var rest = params.toString();
    var address = window.location.pathname + window.location.search + (rest ? "#" + rest : "");
    history.replaceState(history.state, "", address);
  }

  // A refused token is forgotten, unless another tab has stored a newer one meanwhile.
  function forgetToken(token) {
    if (kept === token) kept = null;
    try {
      if (window.localStorage.getItem(TOKEN_KEY) === token) window.localStorage.removeItem(TOKEN_KEY);
    } catch (err) { /* nothing stored */ }
  }

  var refused = false; // the server has refused this page's token: later refusals say the same

  // A request of this page: the token in its header (read at each request: a tab that opened the address of
  // a restarted server stored its new token for every tab), no cookie, nothing cached.
  function get(url, options) {
    var token = storedToken();
    var init = options || {};
    var headers = new Headers(init.headers || {});
    if (token) headers.set("Authorization", "Bearer " + token);
    init.headers = headers;
    init.credentials = "omit";
    init.cache = "no-store";
    return fetch(url, init).then(function (response) {
      if (response.status === 401) {
        // The server does not take this token: it restarted with a new one.
        if (token) {
          forgetToken(token);
          refused = true;
        }
        notice(refused ? RESTARTED : NO_TOKEN);
      }
      return response;
    });
  }

  // -- the page's pieces ---------------------------------------------------------------------------------

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

  function notice(text) {
    var p = document.getElementById("notice");
    if (!p) return;
    p.textContent = text;
    p.hidden = false;
  }

  function setLive(on) {
    var dot = document.getElementById("live");
    if (dot) dot.className = on ? "live on" : "live";
  }

  // A server-sent event stream, read with fetch: EventSource cannot send a header. `on` maps event names to
  // handlers of the event's data (parsed JSON), and `open` to a handler called at each (re)connection. As
  // EventSource does, it reconnects by itself after a network error or the end of the stream (the server
  // away, or restarting); an answer other than 200 ends it, said on the page (401: a new token).
  var RETRY_FIRST = 500;
  var RETRY_MOST = 4000;

  function eventStream(url, on) {
    var closed = false;
    var controller = null;
    var timer = 0;
    var retry = RETRY_FIRST;

    function again() {
      setLive(false);
      if (closed) return;
      timer = setTimeout(connect, retry);
      retry = Math.min(retry * 2, RETRY_MOST);
    }

    function dispatch(event, data) {
      if (closed || !on[event]) return;
      on[event](JSON.parse(data));
    }

    function read(reader) {
      var decoder = new TextDecoder();
      var buffer = "";
      var event = "message";
      var data = [];
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done || closed) return;
          var text = decoder.decode(chunk.value, { stream: true });
          buffer += text;
          if (text.indexOf("\n") < 0) return pump(); // a long line still coming: nothing to split yet
          var lines = buffer.split("\n");
          buffer = lines.pop();
          lines.forEach(function (raw) {
            var line = raw.charAt(raw.length - 1) === "\r" ? raw.slice(0, -1) : raw;
            if (line === "") {
              if (data.length) dispatch(event, data.join("\n"));
              event = "message";
              data = [];
            } else if (line.charAt(0) !== ":") { // a comment (the server's keepalive) is skipped
              var colon = line.indexOf(":");
              var field = colon < 0 ? line : line.slice(0, colon);
              var value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "event") event = value;
              else if (field === "data") data.push(value);
            }
          });
          return pump();
        });
      }
      return pump();
    }

    function connect() {
      timer = 0;
      if (closed) return;
      var mine = new AbortController();
      controller = mine;
      get(url, { signal: mine.signal, headers: { Accept: "text/event-stream" } }).then(function (response) {
        if (closed) return null;
        if (!response.ok) {
          closed = true;
          setLive(false);
          if (response.status !== 401) {
            notice("live updates stopped (the server answered " + response.status + "): reload the page");
          }
          return null;
        }
        setLive(true);
        retry = RETRY_FIRST;
        if (on.open) on.open();
        return read(response.body.getReader());
      }).then(function () {
        if (!mine.signal.aborted) again(); // the stream ended: the server went away or restarts
      }, function () {
        if (!mine.signal.aborted) again(); // no server there (yet): try again, as EventSource does
      });
    }

    connect();
    return {
      close: function () {
        closed = true;
        if (timer) clearTimeout(timer);
        if (controller) controller.abort();
        setLive(false);
      },
    };
  }

  // A browser opens at most 6 connections to one host for all of its tabs (HTTP/1.1), and every page's
  // event stream holds one: a tab in the background gives its stream up, so the tabs in front (and new
  // ones) can load; it reopens the stream, and so catches up, when it is shown again.
  function whileVisible(resume, pause) {
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "hidden") {
        pause();
        setLive(false);
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
      source = eventStream(address, { jobs: apply });
    }
    function apply(data) {
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
    open(attr("events"));
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
    var shown = plotView();
    var params = new URLSearchParams({ name: name, x: shown.x, scale: shown.scale, v: String(metricVersion) });
    return attr("job") + "/plot.svg?" + params.toString();
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

  function forgetPicture(img) {
    if (img.src.indexOf("blob:") === 0) URL.revokeObjectURL(img.src);
  }

  // Draws the plot of `name` as the page's axes say, unless that is the picture asked for already. An <img>
  // cannot send a header: the picture is fetched with the page's token and shown from a blob: address. It
  // replaces the shown one once loaded, so a growing plot never blinks (one request per redraw), unless a
  // newer one was asked for meanwhile (more samples, or other axes). `data-src` says what the image shows.
  function drawPlot(name, src) {
    if (wanted[name] === src) return;
    wanted[name] = src;
    get(src).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.blob();
    }).then(function (blob) {
      if (wanted[name] !== src) return;
      var next = plotImg(name);
      next.alt = plots[name].alt;
      next.setAttribute("data-src", src);
      next.onload = function () {
        if (wanted[name] !== src) { forgetPicture(next); return; }
        var shown = plots[name];
        if (shown.parentNode) shown.parentNode.replaceChild(next, shown);
        forgetPicture(shown);
        plots[name] = next;
      };
      next.src = URL.createObjectURL(blob);
    }).catch(function () {
      // The shown picture stays; the next change (or the trailing redraw) asks again.
      if (wanted[name] === src) delete wanted[name];
    });
  }

  function redrawPlots() {
    Object.keys(plots).forEach(function (name) { drawPlot(name, plotSrc(name)); });
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
    redrawPlots();
  }

  function renderMetrics(d) {
    metricVersion = d.version;
    var box = document.getElementById("metrics");
    d.names.forEach(function (name) {
      if (plots[name]) return;
      plots[name] = plotImg(name);
      box.appendChild(plots[name]);
      drawPlot(name, plotSrc(name));
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
    var stream = eventStream(attr("events") + (query ? "?" + query : ""), {
      // Every connection sends the log from its start: after a reconnect, the page starts it over.
      open: resetLog,
      status: onStatus,
      metrics: renderMetrics,
      lines: appendLines,
      end: function () {
        document.getElementById("log").appendChild(el("div", "— end of output —", "log-end"));
        keepAtEnd();
      },
      failed: function (data) { logError(data.message); },
      gone: function (data) {
        stream.close();
        source = null;
        jobGone(data);
      },
    });
    source = stream;
  }

  function act(button) {
    var action = button.getAttribute("data-action");
    var job = attr("id");
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
    get(attr("job") + "/" + action, { method: "POST" }).then(function (response) {
      // Read as text first: a refusal may be plain text (the server's guard: a 401 after it restarted with
      // a new token), and is shown as the server said it, not as a JSON parser's complaint.
      return response.text().then(function (text) {
        var data = null;
        try { data = JSON.parse(text); } catch (err) { data = null; }
        if (!response.ok) {
          failed((data && data.error) || text.trim() || response.statusText || "HTTP " + response.status);
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
    metricVersion = parseInt(document.getElementById("metrics").getAttribute("data-version"), 10) || 0;
    document.querySelectorAll("#metrics img.plot").forEach(function (img) {
      var name = img.getAttribute("data-metric");
      plots[name] = img;
      var src = img.getAttribute("data-src");
      img.removeAttribute("data-src"); // said again once its picture is shown
      drawPlot(name, src);
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

  // -- the page's content ------------------------------------------------------------------------------

  // The layout came without anything of a job (any page address answers it to anyone): its content is
  // asked for with the token, put in the layout as the server rendered it, and kept current from there.
  function load() {
    takeToken();
    if (!storedToken()) {
      notice(NO_TOKEN);
      return;
    }
    var path = window.location.pathname;
    var address = path === "/" ? "/content" : path.replace(/\/$/, "") + "/content";
    get(address).then(function (response) {
      if (response.status === 401) return; // said by get()
      return response.text().then(function (text) {
        if ((response.headers.get("content-type") || "").indexOf("text/html") !== 0) {
          notice("the server answered " + response.status + ": " + text.trim());
          return;
        }
        var box = document.getElementById("view");
        box.innerHTML = text; // the server's HTML, every value in it escaped (pages.py)
        view = box.firstElementChild;
        document.title = attr("title") + " · kubetrain";
        if (attr("view") === "jobs") jobsPage();
        if (attr("view") === "job") jobPage();
      });
    }, function () {
      notice("the server cannot be reached: reload the page once kubetrain ui runs again");
    });
  }

  load();
})();
