// kubetrain ui: puts the page's content in its layout and keeps it current from server-sent events.
//
// One renderer: the server renders every piece of the pages (Jinja2 templates, every value escaped there),
// on the first load and in its events; this script places the pieces it is sent (`place`), and renders only
// what streams in as data: the log's lines (as text, never HTML), the plots, and the text of times, which
// changes with the clock (`formatTimes`: the one formatter of ages, durations and clock times).
//
// The key to the page: the address kubetrain ui prints carries the token after `#` (a browser never sends
// that part). This script keeps it in the origin's storage (an origin is scheme, host and port: another
// server on this machine has another origin and cannot read it), removes it from the address bar, and sends
// it in a header with every request: a browser sends no header of a page's own to any other server, where a
// cookie would go to every port of 127.0.0.1. What a page shows (the table's order and filters, the log's
// filters, the plots' axes) is in the address's query; a line of the log is `#L<n>` once the token is gone.
(function () {
  "use strict";

  var MAX_LOG_LINES = 200000;
  var TOKEN_KEY = "kubetrain-token";
  var NO_TOKEN = "This page needs its key: open the address kubetrain ui printed at start (it ends with #token=…).";
  var RESTARTED = "the server restarted with a new token: open the address it printed at start";

  // The page's content root, once loaded: its data-* attributes say what it shows (templates: `view`).
  var view = null;
  // What the content shown now holds open (its event stream, its listeners): let go of before the next.
  var leaving = [];

  function attr(name) { return view ? view.getAttribute("data-" + name) : null; }

  function byId(id) { return document.getElementById(id); }

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
  // entry keep the address without it (and its query, which says what the page shows).
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

  // A piece the server rendered, in its place: `html` comes from the server's templates, every value in it
  // escaped there (and the page's CSP runs no script that is not kubetrain's own file).
  function place(node, html) {
    node.innerHTML = html;
    formatTimes(node);
  }

  // The pieces of an event, by the id of the element each fills; a piece that did not change is left alone
  // (a selection in it, a link about to be clicked, stays). The first event of a stream repeats what the
  // page was rendered with: compared as the browser reads both.
  var placed = {};
  function placeAll(pieces) {
    Object.keys(pieces || {}).forEach(function (id) {
      var node = byId(id);
      if (!node || placed[id] === pieces[id]) return;
      var fresh = document.createElement("template");
      fresh.innerHTML = pieces[id];
      formatTimes(fresh.content);
      if (placed[id] === undefined && fresh.innerHTML === node.innerHTML) { placed[id] = pieces[id]; return; }
      placed[id] = pieces[id];
      place(node, pieces[id]);
    });
  }

  // A table row the server rendered.
  function rowOf(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    var tr = t.content.firstElementChild;
    formatTimes(tr);
    return tr;
  }

  // -- times: the one formatter ------------------------------------------------------------------------

  // kubectl's ages, as `kubetrain list` prints them.
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

  function two(n) { return (n < 10 ? "0" : "") + n; }

  // A clock time in the reader's time zone: "14:03:07", with milliseconds for a log line.
  function formatClock(seconds, millis) {
    var d = new Date(seconds * 1000);
    var text = two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
    if (millis) text += "." + String(d.getMilliseconds() + 1000).slice(1);
    return text;
  }

  // Every <time data-t> under `root`, written as its data-fmt says: `age` (since then), `duration` (from
  // then to data-end, or to now), `clock`. Its title says the moment in full.
  function formatTimes(root) {
    var now = Date.now() / 1000;
    (root || document).querySelectorAll("time[data-t]").forEach(function (node) {
      var t = parseFloat(node.getAttribute("data-t"));
      if (isNaN(t)) return;
      var fmt = node.getAttribute("data-fmt");
      var end = parseFloat(node.getAttribute("data-end"));
      var text;
      if (fmt === "duration") text = formatAge((isNaN(end) ? now : end) - t);
      else if (fmt === "clock") text = formatClock(t);
      else text = formatAge(now - t) + " ago";
      if (node.textContent !== text) node.textContent = text;
      if (!node.title && fmt !== "duration") node.title = new Date(t * 1000).toLocaleString();
    });
  }

  function notice(text) {
    var p = byId("notice");
    if (!p) return;
    p.textContent = text;
    p.hidden = false;
  }

  function setLive(on) {
    var dot = byId("live");
    if (!dot) return;
    dot.className = on ? "live on" : "live";
    dot.setAttribute("aria-label", on ? "live updates: on" : "live updates: off");
  }

  // The address's query with `changes` (a null value removes a parameter), without a new history entry.
  function setQuery(changes, keepHash) {
    var params = new URLSearchParams(window.location.search);
    Object.keys(changes).forEach(function (k) {
      if (changes[k] === null || changes[k] === "") params.delete(k);
      else params.set(k, changes[k]);
    });
    var query = params.toString();
    var hash = keepHash ? window.location.hash : "";
    history.replaceState(history.state, "", window.location.pathname + (query ? "?" + query : "") + hash);
  }

  // A server-sent event stream, read with fetch: EventSource cannot send a header. `on` maps event names to
  // handlers of the event's data (parsed JSON), and `open` to a handler called at each (re)connection; `url`
  // is a function, asked at each (re)connection (the log's stream then says how far the page has read). As
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
      get(url(), { signal: mine.signal, headers: { Accept: "text/event-stream" } }).then(function (response) {
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
    function changed() {
      if (document.visibilityState === "hidden") {
        pause();
        setLive(false);
      } else {
        resume();
      }
    }
    document.addEventListener("visibilitychange", changed);
    leaving.push(function () { document.removeEventListener("visibilitychange", changed); });
  }

  // -- moving between views of one page ---------------------------------------------------------------

  // A link or form of the content that changes what the page shows (`data-nav`: the table's order, filters
  // and pages) changes the address and asks the server for that content; the browser's back and forward
  // buttons do the same. A plain link (a job's page) is a plain navigation.
  function navigate(address, replace) {
    if (replace) history.replaceState(null, "", address);
    else history.pushState(null, "", address);
    load();
  }

  document.addEventListener("click", function (event) {
    var a = event.target.closest ? event.target.closest("a[data-nav]") : null;
    if (!a || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return; // a new tab or window
    event.preventDefault();
    navigate(a.getAttribute("href"), false);
  });
  // Back and forward load the view of the address; a change of its fragment alone (a line's link on a job
  // page) is the same view, scrolled by its `hashchange`, not drawn again (that would start its log over).
  window.addEventListener("popstate", function () {
    if (window.location.pathname + window.location.search !== shownAddress) load();
  });

  // -- the jobs table -------------------------------------------------------------------------------

  // The query of the table's filter form: what is set, and nothing for a default (the server says what a
  // missing parameter means). A new filter shows its first page.
  function filterQuery(form) {
    var params = new URLSearchParams();
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name || field.value === "") return;
      if (field.name === "per" && field.value === "50") return;
      params.set(field.name, field.value);
    });
    var query = params.toString();
    return "/" + (query ? "?" + query : "");
  }

  // The stream sends only what changed (kubetrain/ui/table_diff.py): the rows that are new or differ, each
  // rendered, and every row's key in order when the set or order of rows moved; and the summary under the
  // table when it changed. Rows that did not change are not touched.
  function jobsPage() {
    var tbody = byId("job-rows");
    var rows = {};
    Array.prototype.forEach.call(tbody.rows, function (tr) { rows[tr.getAttribute("data-key")] = tr; });
    var shown = {}; // each row's HTML as last placed from the stream (a reopened stream resends every row)
    // Ticked jobs, in the order ticked: "compare" opens the first one's page with the others to compare
    // with (`with=`), its first metric's interactive plot open.
    var picked = [];
    function sayPicked() {
      byId("compare").disabled = picked.length < 2;
      byId("picked").textContent = picked.length ? picked.length + " ticked" : "tick two or more jobs";
    }
    tbody.addEventListener("change", function (event) {
      var key = event.target.getAttribute && event.target.getAttribute("data-pick");
      if (!key) return;
      picked = picked.filter(function (k) { return k !== key; });
      if (event.target.checked) picked.push(key);
      sayPicked();
    });
    byId("compare").addEventListener("click", function () {
      if (picked.length < 2) return;
      var first = picked[0].split("/");
      var href = "/jobs/" + encodeURIComponent(first[0]) + "/" + encodeURIComponent(first.slice(1).join("/"));
      navigate(href + "?" + new URLSearchParams({ "with": picked.slice(1).join(",") }).toString(), false);
    });
    var source = null;
    var address = attr("events");
    function apply(data) {
      data.upsert.forEach(function (job) {
        var key = job.backend + "/" + job.id;
        var html = data.html[key];
        if (shown[key] === html) return;
        shown[key] = html;
        var tr = rowOf(html);
        var box = tr.querySelector("input.pick");
        if (box) box.checked = picked.indexOf(key) >= 0; // a row updated keeps its tick
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
      byId("count").textContent = String(data.count);
      placeAll(data.fragments);
    }
    function open(url) {
      source = eventStream(function () { return url; }, { jobs: apply });
    }
    open(address);
    // The page's digest says what was rendered; after a pause the stream starts from every row.
    whileVisible(function () { open(address.replace(/([?&])have=[^&]*&?/, "$1").replace(/[?&]$/, "")); },
      function () { source.close(); });
    leaving.push(function () { source.close(); });

    var form = byId("job-filters");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      navigate(filterQuery(form), false);
    });
    form.addEventListener("change", function (event) {
      if (event.target.tagName === "SELECT") navigate(filterQuery(form), false);
    });
    // The name search follows the typing (a pause of 300 ms), in one history entry.
    var typing = 0;
    form.elements.q.addEventListener("input", function () {
      clearTimeout(typing);
      typing = setTimeout(function () { navigate(filterQuery(form), true); }, 300);
    });
    leaving.push(function () { clearTimeout(typing); });
  }

  // -- a job's page -----------------------------------------------------------------------------------

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

  function showPhase(phase) {
    var badge = byId("phase");
    badge.textContent = phase;
    badge.className = "phase phase-" + phase;
  }

  // The status: the server's pieces of the page (its head, the replicas, the Pending causes, the failure,
  // the conditions), and what the actions may do now. A status event after an action's reply says what the
  // action did: the reply's line ("resume: Pending") would otherwise stay beside a job Running by now.
  function onStatus(d) {
    if (acting && acting.replied) {
      byId("action-result").textContent = "";
      acting = null;
    }
    placeAll(d.html);
    allowed = d.actions;
    enableActions();
  }

  var ENDED = ["Succeeded", "Failed", "Cancelled"];

  // The job is not there any more (deleted here, from the CLI, or on a cluster by its cancel): the page stops
  // looking alive. A job that had ended keeps its phase (a cancel on a cluster deletes the job it cancelled).
  function jobGone(data) {
    gone = true;
    acting = null;
    if (ENDED.indexOf(byId("phase").textContent) < 0) {
      // "Deleted" when the server says so; else "Gone" (it may also be a backend that stopped answering).
      showPhase(data.deleted === true ? "Deleted" : "Gone");
    }
    byId("message").textContent = data.message;
    enableActions();
    setLive(false);
    log.finish("— the job is gone: no more output —", true);
  }

  // -- plots: pictures the server draws (svg.py), fetched with the token ------------------------------------

  var metricVersion = 0;

  // How the plots are drawn now: the x axis and the y scale the page's controls say.
  function plotView() {
    return { x: byId("metric-x").value, scale: byId("metric-scale").value };
  }

  // The name is a query parameter, encoded (pages.plot_src builds the same): `eval/loss`, or a name with
  // `?`, `#`, `%` or a newline, cannot be a path segment.
  function plotSrc(name) {
    var shown = plotView();
    var params = new URLSearchParams({ name: name, x: shown.x, scale: shown.scale, v: String(metricVersion) });
    return attr("job") + "/plot.svg?" + params.toString();
  }

  // What the picture shows, in words (as its own title says it).
  function plotAlt(name) {
    var shown = plotView();
    return name + " by " + shown.x + (shown.scale === "log" ? ", log scale" : "");
  }

  // Each plot's image by metric name, and the address each should show (the newest asked for).
  var plots = {};
  var wanted = {};

  function plotImg(name) {
    var img = document.createElement("img");
    img.className = "plot";
    img.setAttribute("data-metric", name);
    img.alt = plotAlt(name);
    img.tabIndex = 0;
    img.title = "open interactive plot";
    return img;
  }

  function forgetPicture(img) {
    if (img.src.indexOf("blob:") === 0) URL.revokeObjectURL(img.src);
  }

  // Draws the plot of `name` as the page's axes say, unless that is the picture asked for already. An <img>
  // cannot send a header: the picture is fetched with the page's token and shown from a blob: address. It
  // replaces the shown one once loaded, so a growing plot never blinks (one request per redraw), unless a
  // newer one was asked for meanwhile (more samples, or other axes). `data-src` says what the image shows.
  // Only the pictures in view (or near it) are fetched: a job logging a thousand metrics would otherwise
  // ask for a thousand pictures at once, and the ones in view would wait behind the rest. A picture out of
  // view keeps the address it should show (`later`) and is fetched when it comes near.
  var near = {};
  var later = {};
  var seen = window.IntersectionObserver ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      var name = e.target.getAttribute("data-metric");
      if (plots[name] !== e.target) return; // a picture since replaced
      near[name] = e.isIntersecting;
      if (e.isIntersecting && later[name]) {
        var src = later[name];
        delete later[name];
        drawPlot(name, src);
      }
    });
  }, { rootMargin: "800px 0px" }) : null;

  function watchPicture(img) { if (seen) seen.observe(img); }

  function drawPlot(name, src) {
    if (seen && !near[name]) { later[name] = src; return; }
    if (wanted[name] === src) return;
    wanted[name] = src;
    var alt = plotAlt(name);
    get(src).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.blob();
    }).then(function (blob) {
      if (wanted[name] !== src) return;
      var next = plotImg(name);
      next.alt = alt;
      next.setAttribute("data-src", src);
      next.onload = function () {
        if (wanted[name] !== src) { forgetPicture(next); return; }
        var shown = plots[name];
        if (shown.parentNode) shown.parentNode.replaceChild(next, shown);
        forgetPicture(shown);
        if (seen) seen.unobserve(shown);
        plots[name] = next;
        watchPicture(next);
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
    loadExplore();
  }

  function renderMetrics(d) {
    metricVersion = d.version;
    var box = byId("metrics");
    d.names.forEach(function (name) {
      if (plots[name]) return;
      plots[name] = plotImg(name);
      box.appendChild(plots[name]);
      watchPicture(plots[name]);
      drawPlot(name, plotSrc(name));
    });
    byId("no-metrics").hidden = d.names.length > 0;
    var omitted = byId("metrics-omitted");
    if (omitted) {
      omitted.hidden = !d.omitted;
      omitted.textContent = d.omitted
        ? d.omitted.toLocaleString("en") + " more metric name" + (d.omitted === 1 ? "" : "s") +
          " not shown: past the web view's limit of " + d.names.length.toLocaleString("en") +
          " (kubetrain ui --max-metric-names)"
        : "";
    }
    if (!plotTimer) {
      plotTimer = setTimeout(refreshPlots, Math.max(0, plotsDrawn + PLOT_EVERY - performance.now()));
    }
  }

  function plotsPanel() {
    metricVersion = parseInt(byId("metrics").getAttribute("data-version"), 10) || 0;
    document.querySelectorAll("#metrics img.plot").forEach(function (img) {
      var name = img.getAttribute("data-metric");
      plots[name] = img;
      img.alt = plotAlt(name);
      img.tabIndex = 0;
      img.title = "open interactive plot";
      var src = img.getAttribute("data-src");
      img.removeAttribute("data-src"); // said again once its picture is shown
      watchPicture(img);
      drawPlot(name, src);
    });
    byId("plot-controls").addEventListener("change", function () {
      var shown = plotView();
      setQuery({ x: shown.x === "step" ? null : shown.x, scale: shown.scale === "linear" ? null : shown.scale }, true);
      redrawPlots();
    });
  }

  // -- one metric, interactive: uPlot (static/uplot.iife.min.js) over the metric's data -----------------
  //
  // Opened from a metric's picture (click or Enter), named in the address (`plot=`) with its controls, so a
  // reload or a shared address shows the same. The data is `.../metrics?name=&format=lines`: a line per
  // series and attempt (plot_data.py), so a restarted job's attempts are lines of their own (never one drawn
  // across the downtime): the latest attempt by default, the earlier ones faded on `attempts: all`, and on
  // time axes a dashed mark where each later attempt began. Hover shows every line's value at the cursor;
  // drag zooms, a double click zooms back out; smoothing is TensorBoard's (an exponential moving average,
  // debiased); `ranks: mean` draws the mean of the ranks at each step with their min-max as a band.

  var COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"];
  var EXPLORE_FIELDS = { ex: "step", ey: "linear", ranks: "each", attempts: "latest", smooth: "0", "with": "" };
  var explore = { name: null, sets: null, chart: null, asked: 0, zoomed: false, marks: [] };

  function exploreForm() { return byId("explore-controls"); }

  function exploreView() {
    var f = exploreForm().elements;
    return { x: f.ex.value, scale: f.ey.value, ranks: f.ranks.value, attempts: f.attempts.value,
      smooth: Math.min(0.99, Math.max(0, parseFloat(f.smooth.value) || 0)) };
  }

  function metricUrl(name, format) {
    return attr("job") + "/metrics?" + new URLSearchParams({ name: name, format: format }).toString();
  }

  // TensorBoard's smoothing: each value the moving average of those before it, weighted `weight`, divided
  // by the weights' sum so far (the first values are not pulled towards 0). A null (NaN, inf) stays a gap.
  function smoothed(values, weight) {
    if (!weight) return values.slice();
    var last = 0, n = 0;
    return values.map(function (v) {
      if (v === null) return null;
      last = last * weight + (1 - weight) * v;
      n += 1;
      return last / (1 - Math.pow(weight, n));
    });
  }

  // The lines to draw as the controls say: [{label, x: [...], y: [...], color, faded, band?}]. Compared
  // with other jobs, each job has a colour of its own and its lines are named by the job; relative time
  // then counts from each job's own start, so the runs lie over each other.
  function shownLines(view) {
    var sets = explore.sets || [];
    var out = [];
    sets.forEach(function (set, j) {
      var lines = set.lines || [];
      if (view.attempts === "latest") lines = lines.filter(function (ln) { return ln.attempt === ln.attempts; });
      var origin = Infinity;
      lines.forEach(function (ln) { if (ln.time.length) origin = Math.min(origin, ln.time[0]); });
      var xs = function (ln) {
        if (view.x === "step") return ln.step;
        if (view.x === "time") return ln.time;
        return ln.time.map(function (t) { return t - origin; });
      };
      var prefix = sets.length > 1 ? set.id + " " : "";
      if (view.ranks === "mean") {
        out = out.concat(meanLines(lines, xs, prefix, sets.length > 1 ? j : null));
        return;
      }
      var labels = [];
      lines.forEach(function (ln) { if (labels.indexOf(ln.label) < 0) labels.push(ln.label); });
      lines.forEach(function (ln) {
        var color = COLORS[(sets.length > 1 ? j : labels.indexOf(ln.label)) % COLORS.length];
        var many = ln.attempts > 1;
        out.push({ label: prefix + ln.label + (many ? " attempt " + ln.attempt : ""), x: xs(ln), y: ln.value,
          color: color, faded: ln.attempt < ln.attempts, start: many && ln.attempt > 1 ? xs(ln)[0] : null });
      });
    });
    return out;
  }

  // Per attempt: the mean of every rank's value at each step, and the least and the most of them.
  function meanLines(lines, xs, prefix, colorIndex) {
    var groups = {};
    lines.forEach(function (ln) { (groups[ln.attempt] = groups[ln.attempt] || []).push(ln); });
    var out = [];
    Object.keys(groups).forEach(function (attempt, g) {
      var at = {};
      groups[attempt].forEach(function (ln) {
        var x = xs(ln);
        ln.step.forEach(function (step, i) {
          if (step === null || ln.value[i] === null) return;
          var one = at[step] || (at[step] = { vals: [], xs: [] });
          one.vals.push(ln.value[i]);
          one.xs.push(x[i]);
        });
      });
      var steps = Object.keys(at).map(Number).sort(function (a, b) { return a - b; });
      var x = [], mean = [], lo = [], hi = [];
      steps.forEach(function (s) {
        var one = at[s];
        var sum = one.vals.reduce(function (a, b) { return a + b; }, 0);
        x.push(one.xs.reduce(function (a, b) { return a + b; }, 0) / one.xs.length);
        mean.push(sum / one.vals.length);
        lo.push(Math.min.apply(null, one.vals));
        hi.push(Math.max.apply(null, one.vals));
      });
      var many = Object.keys(groups).length > 1;
      var color = COLORS[(colorIndex === null ? g : colorIndex) % COLORS.length];
      var name = prefix + "mean of " + groups[attempt].length + (many ? ", attempt " + attempt : "");
      var latest = g === Object.keys(groups).length - 1;
      out.push({ label: name, x: x, y: mean, color: color, faded: !latest, start: many && g > 0 ? x[0] : null });
      out.push({ label: prefix + "min", x: x, y: lo, color: color, faded: true, band: "lo", raw: true });
      out.push({ label: prefix + "max", x: x, y: hi, color: color, faded: true, band: "hi", raw: true });
    });
    return out;
  }

  // A line's points as one table for uPlot.join, sorted by x (x of a step axis may repeat: kept once).
  function table(line, view) {
    var ys = line.raw ? line.y : smoothed(line.y, view.smooth);
    var pairs = [];
    for (var i = 0; i < line.x.length; i++) {
      var y = ys[i];
      if (line.x[i] === null || line.x[i] === undefined) continue;
      if (view.scale === "log" && y !== null && y <= 0) y = null; // a log axis has no place for it
      pairs.push([line.x[i], y]);
    }
    pairs.sort(function (a, b) { return a[0] - b[0]; });
    var x = [], y2 = [];
    pairs.forEach(function (p) {
      if (x.length && x[x.length - 1] === p[0]) { y2[y2.length - 1] = p[1]; return; }
      x.push(p[0]);
      y2.push(p[1]);
    });
    return [x, y2];
  }

  function formatX(view, v) {
    if (v === null || v === undefined) return "";
    if (view.x === "time") return new Date(v * 1000).toLocaleTimeString();
    if (view.x === "relative") return v.toFixed(1) + " s";
    return String(Math.round(v * 100) / 100);
  }

  function formatY(v) {
    if (v === null || v === undefined) return "—";
    if (v === 0) return "0";
    var a = Math.abs(v);
    return a >= 1e5 || a < 1e-3 ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }

  // On a sparse line (ranks logging at other times) the cursor's column may hold no sample of it: the
  // nearest one of that line is shown instead.
  function nearestIdx(u, si, idx) {
    var ys = u.data[si];
    if (ys[idx] !== undefined) return idx;
    for (var d = 1; d < ys.length; d++) {
      if (idx - d >= 0 && ys[idx - d] !== undefined) return idx - d;
      if (idx + d < ys.length && ys[idx + d] !== undefined) return idx + d;
    }
    return idx;
  }

  function sayRange(u, view) {
    var box = byId("explore-plot");
    var min = u.scales.x.min, max = u.scales.x.max;
    box.setAttribute("data-x-min", String(min));
    box.setAttribute("data-x-max", String(max));
    byId("explore-range").textContent = (view.x === "step" ? "steps " : "") + formatX(view, min) + " – " +
      formatX(view, max) + (explore.zoomed ? " (zoomed: double-click to see all)" : " (drag to zoom)") +
      (explore.problems ? "; could not load " + explore.problems : "");
  }

  function drawExplore() {
    if (!explore.sets || !window.uPlot) return;
    var view = exploreView();
    var lines = shownLines(view);
    var box = byId("explore-plot");
    var width = Math.max(280, box.clientWidth || 600);
    var tables = lines.map(function (ln) { return table(ln, view); });
    var data = tables.length ? uPlot.join(tables) : [[]];
    var series = [{ label: view.x === "step" ? "step" : "time", value: function (u, v) { return formatX(view, v); } }];
    var bands = [];
    lines.forEach(function (ln, i) {
      series.push({
        label: ln.label, stroke: ln.color, width: ln.band ? 1 : 1.6, alpha: ln.faded ? 0.4 : 1,
        dash: ln.faded && !ln.band ? [6, 4] : undefined, spanGaps: false, points: { show: false },
        value: function (u, v) { return formatY(v); },
      });
      if (ln.band === "hi") bands.push({ series: [i + 1, i], fill: ln.color + "22" });
    });
    explore.marks = lines.filter(function (ln) { return ln.start !== null && ln.start !== undefined; })
      .map(function (ln) { return ln.start; });
    var opts = {
      width: width, height: 300,
      scales: { x: { time: view.x === "time" }, y: { distr: view.scale === "log" ? 3 : 1 } },
      series: series, bands: bands,
      axes: [{}, { size: 70, values: function (u, ticks) { return ticks.map(formatY); } }],
      cursor: { drag: { x: true, y: false }, dataIdx: nearestIdx },
      legend: { live: true },
      hooks: {
        setSelect: [function (u) { if (u.select.width > 0) explore.zoomed = true; }],
        setScale: [function (u, key) { if (key === "x") sayRange(u, view); }],
        draw: [function (u) {
          if (view.x === "step") return; // a restart's time: where a later attempt began
          var ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#b45309";
          ctx.setLineDash([4, 4]);
          explore.marks.forEach(function (x) {
            var px = u.valToPos(x, "x", true);
            if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
            ctx.beginPath();
            ctx.moveTo(px, u.bbox.top);
            ctx.lineTo(px, u.bbox.top + u.bbox.height);
            ctx.stroke();
          });
          ctx.restore();
        }],
      },
    };
    // The same lines with more samples (a running job): the data replaced, the cursor and the zoom kept.
    var key = JSON.stringify(view) + "\n" + lines.map(function (ln) { return ln.label + ln.color + ln.faded; }).join("\n");
    if (explore.chart && explore.key === key) {
      explore.chart.setData(data, !explore.zoomed);
      sayRange(explore.chart, view);
      return;
    }
    explore.key = key;
    var zoom = explore.zoomed && explore.chart ? { min: explore.chart.scales.x.min, max: explore.chart.scales.x.max } : null;
    if (explore.chart) explore.chart.destroy();
    box.textContent = "";
    explore.chart = new uPlot(opts, data, box);
    box.uplot = explore.chart; // what is drawn, for a reader of the page (the browser tests read its data)
    explore.chart.over.addEventListener("dblclick", function () { explore.zoomed = false; sayRange(explore.chart, view); });
    box.setAttribute("data-lines", String(lines.length));
    if (zoom) explore.chart.setScale("x", zoom);
    sayRange(explore.chart, view);
  }

  // The jobs the plot shows: this page's, then those the address names to compare with (`with=`, ids of
  // this page's backend or `backend/id`, comma-separated).
  function comparedJobs() {
    var here = attr("job").split("/"); // ["", "jobs", backend, id]
    var jobs = [{ id: here[3], href: attr("job") }];
    (exploreForm().elements["with"].value || "").split(",").forEach(function (word) {
      var one = word.trim();
      if (!one) return;
      var parts = one.indexOf("/") >= 0 ? one.split("/") : [here[2], one];
      var href = "/jobs/" + encodeURIComponent(parts[0]) + "/" + encodeURIComponent(parts.slice(1).join("/"));
      if (jobs.some(function (j) { return j.href === href; })) return;
      jobs.push({ id: parts[0] === here[2] ? parts.slice(1).join("/") : one, href: href }); // named as typed, its backend if another
    });
    return jobs;
  }

  // Fetches the metric's lines of every job shown (again: on this job's `metrics` events while open) and
  // draws them; a job that cannot be read is said, the others drawn.
  function loadExplore() {
    var name = explore.name;
    if (!name) return;
    var asked = ++explore.asked;
    var params = "/metrics?" + new URLSearchParams({ name: name, format: "lines" }).toString();
    var problems = [];
    Promise.all(comparedJobs().map(function (job) {
      return get(job.href + params).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      }).then(function (data) { return { id: job.id, lines: data.lines }; }, function (err) {
        problems.push(job.id + ": " + err.message);
        return { id: job.id, lines: [] };
      });
    })).then(function (sets) {
      if (asked !== explore.asked || explore.name !== name) return;
      explore.sets = sets;
      explore.problems = problems.join("; ");
      drawExplore();
      byId("explore-plot").setAttribute("data-loaded", String(asked));
    });
  }

  function openExplore(name) {
    explore.name = name;
    explore.sets = null;
    explore.zoomed = false;
    byId("explore-title").textContent = name;
    byId("explore").hidden = false;
    setQuery({ plot: name }, true);
    loadExplore();
  }

  function closeExplore() {
    explore.name = null;
    if (explore.chart) { explore.chart.destroy(); explore.chart = null; explore.key = null; }
    byId("explore").hidden = true;
    setQuery({ plot: null }, true);
  }

  // The metric's samples as the server writes them (`kubetrain metrics ID -o csv|json`, this metric's rows).
  function download(format) {
    var name = explore.name;
    get(metricUrl(name, format)).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.blob();
    }).then(function (blob) {
      var a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = (attr("id") + "-" + name).replace(/[^A-Za-z0-9._-]/g, "_") + "." + format;
      a.id = "download-" + format + "-link";
      a.hidden = true;
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 60000);
    }).catch(function (err) { byId("explore-range").textContent = "download failed: " + err; });
  }

  function explorePanel() {
    var form = exploreForm();
    var params = new URLSearchParams(window.location.search);
    Object.keys(EXPLORE_FIELDS).forEach(function (k) {
      if (params.get(k)) form.elements[k].value = params.get(k);
    });
    form.elements["smooth-value"].value = form.elements.smooth.value;
    function changed(event) {
      var changes = {};
      Object.keys(EXPLORE_FIELDS).forEach(function (k) {
        var v = form.elements[k].value;
        changes[k] = v === EXPLORE_FIELDS[k] ? null : v;
      });
      form.elements["smooth-value"].value = form.elements.smooth.value;
      setQuery(changes, true);
      if (event.target.name === "with") {
        if (event.type === "change") loadExplore(); // once the ids are typed, not at every key
      } else {
        drawExplore();
      }
    }
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    byId("explore-close").addEventListener("click", closeExplore);
    byId("download-csv").addEventListener("click", function () { download("csv"); });
    byId("download-json").addEventListener("click", function () { download("json"); });
    var metrics = byId("metrics");
    function pick(event) {
      var img = event.target.closest ? event.target.closest("img.plot") : null;
      if (!img) return;
      if (event.type === "keydown" && event.key !== "Enter" && event.key !== " ") return;
      event.preventDefault();
      openExplore(img.getAttribute("data-metric"));
      byId("explore").scrollIntoView({ block: "nearest" });
    }
    metrics.addEventListener("click", pick);
    metrics.addEventListener("keydown", pick);
    window.addEventListener("resize", function () {
      if (explore.chart) explore.chart.setSize({ width: Math.max(280, byId("explore-plot").clientWidth), height: 300 });
    });
    if (params.get("plot")) {
      openExplore(params.get("plot"));
    } else if (params.get("with")) { // jobs to compare, no metric named: the first one
      var first = document.querySelector("#metrics img.plot");
      if (first) openExplore(first.getAttribute("data-metric"));
    }
  }

  // -- the log: every line kept as data, only the lines in view drawn -------------------------------------

  // The log box is as tall as its lines (a line is LINE px: the scroll bar is right for a log of any length,
  // live or ended), and holds the rows of the lines in view and some around them: a hundred thousand lines
  // scroll as smoothly as a hundred. The lines stay when the tab is hidden (its stream is let go of) and the
  // stream resumes after the last line received (`cursor`), so the log keeps its place and nothing is sent
  // twice. Each line has its number, a link to it (`#L<n>`: the address opens the page on that line), its
  // stream (stderr marked), its time (shown on demand) and the grep's hits (the server finds them).
  var OVERDRAW = 80; // rows drawn beyond the view on each side
  var MARGIN = 20; // rows of that left before the next draw
  var WIDEST = 10000; // characters at most that the box scrolls sideways for

  function makeLog(box, count, follow) {
    var lines = []; // [replica, stream, text, time in ms, hits]
    var dropped = 0; // lines let go of from the front (past MAX_LOG_LINES): the numbering goes on
    var cursor = {}; // replica → [time in ms of its last line, how many of its lines had that time]
    var widest = 0;
    var drawn = [0, 0];
    var selected = 0; // the line the address names (#L<n>), marked
    var target = 0; // a line the address names that has not come yet
    var stamps = false;
    var frame = 0;
    var lineHeight = 18;
    var sizer = el("div", null, "log-sizer");
    var rows = el("div", null, "log-rows");
    sizer.appendChild(rows);
    var self = { ended: false };

    function following() { return follow.checked; }

    function row(i) {
      var line = lines[i];
      var n = dropped + i + 1;
      var div = document.createElement("div");
      div.className = "ln" + (line[1] === "stderr" ? " err" : "") + (n === selected ? " sel" : "");
      var a = el("a", n, "n");
      a.href = "#L" + n;
      div.appendChild(a);
      if (stamps) div.appendChild(el("span", formatClock(line[3] / 1000, true), "ts"));
      div.appendChild(el("span", "[" + line[0] + "]", "k"));
      div.appendChild(document.createTextNode(" "));
      var text = el("span", null, "t");
      var hits = line[4];
      if (hits && hits.length) {
        var at = 0;
        hits.forEach(function (hit) {
          if (hit[0] > at) text.appendChild(document.createTextNode(line[2].slice(at, hit[0])));
          text.appendChild(el("mark", line[2].slice(hit[0], hit[1])));
          at = hit[1];
        });
        if (at < line[2].length) text.appendChild(document.createTextNode(line[2].slice(at)));
      } else {
        text.textContent = line[2];
      }
      div.appendChild(text);
      return div;
    }

    // The rows around the view, unless those drawn still cover it with MARGIN to spare.
    function draw(force) {
      var top = box.scrollTop;
      var first = Math.floor(top / lineHeight);
      var last = Math.min(lines.length, Math.ceil((top + (box.clientHeight || 420)) / lineHeight));
      var covered = first - drawn[0] >= (drawn[0] > 0 ? MARGIN : 0) &&
        drawn[1] - last >= (drawn[1] < lines.length ? MARGIN : 0);
      if (!force && covered && drawn[1] > drawn[0]) return;
      var from = Math.max(0, first - OVERDRAW);
      var to = Math.min(lines.length, last + OVERDRAW);
      var fresh = [];
      for (var i = from; i < to; i++) fresh.push(row(i));
      rows.replaceChildren.apply(rows, fresh);
      rows.style.transform = "translateY(" + from * lineHeight + "px)";
      drawn = [from, to];
    }

    function size() {
      sizer.style.height = lines.length * lineHeight + "px";
      sizer.style.minWidth = "calc(" + (Math.min(widest, WIDEST) + 9 + (stamps ? 13 : 0)) + "ch + 8px)";
    }

    function toEnd() {
      box.scrollTop = box.scrollHeight;
      draw(true);
    }

    self.reset = function () {
      if (pending) { cancelAnimationFrame(pending); pending = 0; }
      lines = [];
      dropped = 0;
      cursor = {};
      widest = 0;
      drawn = [0, 0];
      self.ended = false;
      box.replaceChildren(sizer);
      rows.replaceChildren();
      lines = [["", "stdout", " ", 0, null]]; // one line, measured: the height of every line
      var probe = row(0);
      rows.appendChild(probe);
      lineHeight = probe.offsetHeight || lineHeight;
      lines = [];
      rows.replaceChildren();
      size();
      count.textContent = "";
      byId("log-error").hidden = true;
    };

    self.count = function () { return dropped + lines.length; };

    // Where a resumed stream starts: after each replica's last line received.
    self.cursor = function () { return JSON.stringify(cursor); };

    self.append = function (batch) {
      batch.forEach(function (line) {
        lines.push(line);
        var length = line[0].length + line[2].length + 3;
        if (length > widest) widest = length;
        var at = cursor[line[0]];
        if (at && at[0] === line[3]) at[1] += 1;
        else cursor[line[0]] = [line[3], 1];
      });
      if (lines.length > MAX_LOG_LINES) {
        var over = lines.length - MAX_LOG_LINES;
        lines.splice(0, over);
        dropped += over;
        drawn = [0, 0];
        if (!following()) box.scrollTop = Math.max(0, box.scrollTop - over * lineHeight);
      }
      count.textContent = self.count() + " lines";
      if (target && self.count() >= target) { self.reveal(target); return; }
      later();
    };

    // Lines come in many small batches while a job prints: the box is sized, scrolled and drawn once per
    // frame (each of those asks the browser for a layout), not once per batch.
    var pending = 0;
    function later() {
      if (!pending) pending = requestAnimationFrame(settle);
    }
    function settle() {
      pending = 0;
      size();
      if (following()) toEnd();
      else draw(false);
    }
    // Now rather than at the next frame: the box sized for every line received (before it is scrolled to
    // a line, or its end is said).
    self.settle = function () {
      if (pending) { cancelAnimationFrame(pending); pending = 0; }
      size();
    };

    // The end of the output (or of the job): said below the last line, once (`more`: said after an end too,
    // as the job's going after its output's end).
    self.finish = function (text, more) {
      if (self.ended && !more) return;
      self.ended = true;
      self.settle();
      draw(false);
      box.appendChild(el("div", text, "log-end"));
      if (target) sayMissing();
      if (following()) toEnd();
    };

    function sayMissing() {
      logError("line " + target + " is not in this log (it has " + self.count() + " lines with these filters)");
      target = 0;
    }

    // The line numbered `n` in the middle of the box, marked, the box in view; following paused (it
    // would take the view away). A line not received yet is shown when it comes.
    self.reveal = function (n) {
      self.settle();
      var i = n - dropped - 1;
      if (i >= lines.length) {
        target = n;
        // An ended log gets no more lines: said now (a link followed after the end, on the same page).
        if (self.ended) sayMissing();
        return;
      }
      target = 0;
      selected = n;
      follow.checked = false;
      if (i >= 0) box.scrollTop = Math.max(0, i * lineHeight - (box.clientHeight - lineHeight) / 2);
      draw(true);
      if (box.scrollIntoView) box.scrollIntoView({ block: "nearest" });
    };

    self.stamps = function (on) {
      stamps = on;
      size();
      draw(true);
    };

    box.addEventListener("scroll", function () {
      if (!frame) frame = requestAnimationFrame(function () { frame = 0; draw(false); });
    }, { passive: true });
    // A line's number links to it: the address names the line, and a reload or a link opens there.
    box.addEventListener("click", function (event) {
      var a = event.target.closest ? event.target.closest("a.n") : null;
      if (!a || event.metaKey || event.ctrlKey || event.shiftKey) return;
      event.preventDefault();
      selected = parseInt(a.textContent, 10);
      history.replaceState(history.state, "", window.location.pathname + window.location.search + "#L" + selected);
      follow.checked = false;
      draw(true);
    });
    follow.addEventListener("change", function () { if (following()) toEnd(); });
    pauseOnScrollUp(box, follow, self.settle);
    return self;
  }

  // The line the address names (`#L<n>`), or 0.
  function lineInAddress() {
    var m = /^#L(\d+)$/.exec(window.location.hash);
    return m ? parseInt(m[1], 10) : 0;
  }

  // A scroll up by hand pauses following (the box is unchecked), so the next lines do not pull the view away
  // from what is being read; checking it again jumps to the end. The wheel and the keys say their direction
  // and pause at once; a drag of the scrollbar, a selection or a touch pauses once it has moved the view up,
  // away from the end. Scrolls of the page's own pause nothing.
  function pauseOnScrollUp(box, follow, settle) {
    var held = { pointer: false, touch: false };
    var lastTop = 0;
    function atEnd() { return box.scrollTop + box.clientHeight >= box.scrollHeight - 2; }
    function pause() {
      settle(); // the lines received by now, sized: is there anything above to scroll to?
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
      if (up && (held.pointer || held.touch) && !atEnd()) follow.checked = false;
    }, { passive: true });
  }

  // A note above the log while it waits its turn among the pages reading logs (the server says why).
  function logNote(message) {
    var note = byId("log-note");
    if (!note || note.textContent === message) return;
    note.textContent = message;
    note.hidden = !message;
  }

  function logError(message) {
    var error = byId("log-error");
    error.textContent = message;
    error.hidden = false;
  }

  // The page's one event stream: status, metrics and the log, with the log's filters (the address's query)
  // as its parameters (a browser holds at most 6 connections to one host for all its tabs, so a page holds
  // one). A stream opened again (the tab shown again, the server back) resumes the log after its last line;
  // once the output has ended, it asks for no log at all.
  var source = null;
  var log = null;
  var LOG_FILTERS = ["role", "index", "grep", "tail"];

  function streamAddress() {
    var shown = new URLSearchParams(window.location.search);
    var params = new URLSearchParams();
    LOG_FILTERS.forEach(function (k) { if (shown.get(k)) params.set(k, shown.get(k)); });
    if (log.ended) {
      params = new URLSearchParams({ log: "off" });
    } else if (log.count()) {
      params.delete("tail"); // the lines after those received: all of them
      params.set("after", log.cursor());
    }
    var query = params.toString();
    return attr("events") + (query ? "?" + query : "");
  }

  function openStream(fresh) {
    if (gone) return; // nothing more will come: the page stays as the job was last seen
    if (source) source.close();
    if (fresh) log.reset();
    var stream = eventStream(streamAddress, {
      status: onStatus,
      metrics: renderMetrics,
      lines: function (batch) { logNote(""); log.append(batch); },
      end: function () { logNote(""); log.finish("— end of output —"); },
      failed: function (data) { logNote(""); logError(data.message); },
      waiting: function (data) { logNote(data.message); },
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
      b.addEventListener("click", function () { act(b); });
    });
    plotsPanel();
    explorePanel();
    log = makeLog(byId("log"), byId("log-count"), byId("log-follow"));
    var filters = byId("log-filters");
    filters.addEventListener("submit", function (event) {
      event.preventDefault();
      var changes = {};
      LOG_FILTERS.forEach(function (k) { changes[k] = filters.elements[k].value; });
      setQuery(changes, false); // other filters, other numbering: the line of the address goes
      openStream(true);
    });
    var stamps = byId("log-ts");
    log.stamps(stamps.checked);
    stamps.addEventListener("change", function () {
      setQuery({ ts: stamps.checked ? "1" : null }, true);
      log.stamps(stamps.checked);
    });
    openStream(true);
    if (lineInAddress()) log.reveal(lineInAddress());
    function revealAddressed() { if (lineInAddress()) log.reveal(lineInAddress()); }
    window.addEventListener("hashchange", revealAddressed);
    leaving.push(function () { window.removeEventListener("hashchange", revealAddressed); });
    whileVisible(function () { openStream(false); }, function () { if (source) source.close(); });
  }

  // -- the page's content ------------------------------------------------------------------------------

  // The field being typed in (the table's name search), to keep typing in it once the content is replaced.
  function typing() {
    var field = document.activeElement;
    if (!field || !field.name || !field.form || !field.form.id) return null;
    return { form: field.form.id, name: field.name, value: field.value, start: field.selectionStart, end: field.selectionEnd };
  }

  function keepTyping(was) {
    var form = was && byId(was.form);
    var field = form && form.elements[was.name];
    if (!field) return;
    field.focus();
    if (field.value !== was.value) {
      field.value = was.value;
      field.dispatchEvent(new Event("input")); // typed since it was asked for: asked for again
    }
    try { field.setSelectionRange(was.start, was.end); } catch (err) { /* not a text field */ }
  }

  var loads = 0;

  // The layout came without anything of a job (any page address answers it to anyone): its content is
  // asked for with the token (the address's query says what it shows), put in the layout as the server
  // rendered it, and kept current from there.
  var shownAddress = ""; // the path and query of the view shown (or being fetched)
  function load() {
    takeToken();
    if (!storedToken()) {
      notice(NO_TOKEN);
      return;
    }
    var path = window.location.pathname;
    shownAddress = path + window.location.search;
    var address = (path === "/" ? "/content" : path.replace(/\/$/, "") + "/content") + window.location.search;
    var mine = ++loads;
    get(address).then(function (response) {
      if (response.status === 401) return; // said by get()
      return response.text().then(function (text) {
        if (mine !== loads) return; // a later address was asked for meanwhile
        if ((response.headers.get("content-type") || "").indexOf("text/html") !== 0) {
          notice("the server answered " + response.status + ": " + text.trim());
          return;
        }
        leaving.forEach(function (let_go) { let_go(); });
        leaving = [];
        placed = {};
        var was = typing();
        var box = byId("view");
        place(box, text); // the server's HTML, every value in it escaped (templates)
        view = box.firstElementChild;
        document.title = attr("title") + " · kubetrain";
        if (attr("view") === "jobs") jobsPage();
        if (attr("view") === "job") jobPage();
        keepTyping(was);
      });
    }, function () {
      notice("the server cannot be reached: reload the page once kubetrain ui runs again");
    });
  }

  setInterval(function () { formatTimes(byId("view")); }, 5000); // ages tick in the page: nothing is asked
  load();
})();
