// The run explorer of chainlat's HTML pages: a table of runs, one waterfall at a time.
// Reads the JSON document in #chainlat-runs (see chainlat/report/_explorer.py); every text
// from a trace goes into the page through textContent or an attribute, never as markup.
(function () {
  "use strict";
  var source = document.getElementById("chainlat-runs");
  if (!source) return;
  var D = JSON.parse(source.textContent);
  var S = D.strings, R = D.runs, T = D.trees, KINDS = D.kinds;
  var N = R.total.length;
  var PAGE = 200;
  var ON_PATH = 2, ERROR = 1, CACHED = 4, TO_OUTPUT = 8;
  // path: the critical path drawn, "turn" (to the run's end) or "output" (to its first
  // output, the first audio of a voice turn), for the runs that have one (tree.q).
  var state = { wf: "", variant: "", verdict: "", status: "", trace: "",
                key: "total", dir: -1, shown: PAGE, run: -1, span: -1, list: [], path: "turn" };

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] !== null && attrs[k] !== undefined) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(ms) { return ms === null || ms === undefined ? "-" : ms.toLocaleString("en", { minimumFractionDigits: 1, maximumFractionDigits: 1 }); }
  function fmt3(ms) { return ms.toFixed(3); }
  // A run's own verdict on the per-run limits; beside it, the limits over the set of runs
  // of its workflow that chainlat check found broken or not judged (D.set, by workflow).
  var SET = D.set || {};
  function verdictText(v, i) {
    var own = v === null ? "" : v === 0 ? "kept" : v < 0 ? "not judged" : "broke " + v;
    var set = i === undefined ? null : SET[R.wf[i]];
    if (!own || !set || !(set[0] || set[1])) return own;
    return own + "; set: " + (set[0] ? set[0] + " broken" : "") + (set[0] && set[1] ? ", " : "") +
      (set[1] ? set[1] + " not judged" : "");
  }
  function setBad(i) { var set = SET[R.wf[i]]; return !!(set && (set[0] || set[1])); }
  function outcomeText(ok) { return ok === null ? "" : ok ? "success" : "failure"; }

  // --- filters and sorting ----------------------------------------------------------------

  function fill(select, values, all) {
    select.appendChild(el("option", { value: "" }, all));
    values.forEach(function (v) { select.appendChild(el("option", { value: String(v) }, S[v])); });
  }
  function unique(column) {
    var seen = {}, out = [];
    for (var i = 0; i < N; i++) if (!seen[column[i]]) { seen[column[i]] = 1; out.push(column[i]); }
    return out;
  }
  fill($("cl-f-workflow"), unique(R.wf), "all");
  var variants = unique(R.var);
  fill($("cl-f-variant"), variants, "all");

  function filtered() {
    var out = [], wf = state.wf === "" ? -1 : +state.wf, va = state.variant === "" ? -1 : +state.variant;
    var trace = state.trace.toLowerCase();
    for (var i = 0; i < N; i++) {
      if (wf >= 0 && R.wf[i] !== wf) continue;
      if (va >= 0 && R.var[i] !== va) continue;
      var v = R.verdict[i];
      if (state.verdict === "broken" && !(v > 0)) continue;
      if (state.verdict === "ok" && v !== 0) continue;
      if (state.verdict === "unjudged" && v !== -1) continue;
      if (state.verdict === "none" && v !== null) continue;
      if (state.status === "ok" && R.err[i]) continue;
      if (state.status === "error" && !R.err[i]) continue;
      if (trace && R.trace[i].indexOf(trace) < 0) continue;
      out.push(i);
    }
    return out;
  }
  function sortValue(i) {
    var k = state.key, v = R[k][i];
    if (k === "wf" || k === "var") return S[v];
    return v;
  }
  function sorted(list) {
    var dir = state.dir;
    return list.slice().sort(function (a, b) {
      var x = sortValue(a), y = sortValue(b);
      if (x === null && y === null) return a - b;
      if (x === null) return 1;  // missing values last, whatever the direction
      if (y === null) return -1;
      if (x < y) return -dir;
      if (x > y) return dir;
      return a - b;
    });
  }

  // --- the table ----------------------------------------------------------------------------

  function renderTable() {
    state.list = sorted(filtered());
    var body = $("cl-runs").tBodies[0];
    body.textContent = "";
    var shown = Math.min(state.shown, state.list.length);
    for (var r = 0; r < shown; r++) {
      var i = state.list[r];
      // One tab stop for the whole table (the selected run, else the first): arrows move.
      var current = i === state.run || (r === 0 && state.list.slice(0, shown).indexOf(state.run) < 0);
      var row = el("tr", { "data-run": i, tabindex: current ? "0" : "-1", "aria-selected": i === state.run ? "true" : "false" });
      row.appendChild(el("td", null, S[R.wf[i]]));
      row.appendChild(el("td", null, S[R["var"][i]]));
      row.appendChild(el("td", { "class": "n" }, fmt(R.total[i])));
      row.appendChild(el("td", { "class": "n" }, fmt(R.fo[i]) + (R.fb[i] ? " (a bound)" : "")));
      row.appendChild(el("td", { "class": R.verdict[i] > 0 || R.verdict[i] === -1 || (R.verdict[i] !== null && setBad(i)) ? "bad" : "" }, verdictText(R.verdict[i], i)));
      row.appendChild(el("td", null, (R.err[i] ? "error " : "") + outcomeText(R.ok[i])));
      row.appendChild(el("td", { "class": "mono" }, R.trace[i].slice(0, 16)));
      body.appendChild(row);
    }
    if (shown < state.list.length) {
      var more = el("tr"), cell = el("td", { colspan: "7" });
      var button = el("button", { type: "button", id: "cl-more" }, "show " + Math.min(PAGE, state.list.length - shown) + " more");
      button.addEventListener("click", function () { state.shown += PAGE; renderTable(); });
      cell.appendChild(button); more.appendChild(cell); body.appendChild(more);
    }
    $("cl-count").textContent = state.list.length + " of " + N + " runs" +
      (shown < state.list.length ? ", first " + shown + " listed" : "");
    var heads = $("cl-runs").tHead.querySelectorAll("th");
    heads.forEach(function (th) {
      var key = th.querySelector("button").getAttribute("data-sort");
      th.setAttribute("aria-sort", key === state.key ? (state.dir < 0 ? "descending" : "ascending") : "none");
    });
  }

  function nearestRank(list, q) {
    var values = list.filter(function (i) { return R.total[i] !== null; })
      .sort(function (a, b) { return R.total[a] - R.total[b] || a - b; });
    if (!values.length) return -1;
    var rank = Math.max(1, Math.ceil(q * values.length / 100 - 1e-9));
    return values[rank - 1];
  }
  function pick(which) {
    var list = filtered();
    var i = which === "slowest" ? nearestRank(list, 100) : nearestRank(list, which === "p95" ? 95 : 50);
    if (i >= 0) selectRun(i, which);
  }

  // --- one run ------------------------------------------------------------------------------

  function depthOf(spans) {
    var depth = [];
    for (var j = 0; j < spans.length; j++) depth.push(spans[j][2] < 0 ? 0 : depth[spans[j][2]] + 1);
    return depth;
  }
  function jaegerLink(trace, span, id, text) {
    if (!D.jaeger || !trace) return null;
    var href = D.jaeger + "/trace/" + encodeURIComponent(trace) + (span ? "?uiFind=" + encodeURIComponent(span) : "");
    return el("a", { href: href, id: id, target: "_blank", rel: "noopener" }, text);
  }

  function selectRun(i, why) {
    state.run = i; state.span = -1;
    var rows = document.querySelectorAll("#cl-runs tbody tr[data-run]"), listed = false;
    rows.forEach(function (row) {
      var on = +row.getAttribute("data-run") === i;
      listed = listed || on;
      row.setAttribute("aria-selected", on ? "true" : "false");
      row.setAttribute("tabindex", on ? "0" : "-1");
    });
    if (!listed && rows.length) rows[0].setAttribute("tabindex", "0");
    var tree = T[i], spans = tree.s;
    var head = $("cl-run");
    head.textContent = "";
    head.setAttribute("data-run", i);
    var title = el("h3", null, (why ? why + " run: " : "run: ") + S[R.wf[i]]);
    head.appendChild(title);
    var facts = el("p");
    facts.appendChild(document.createTextNode(
      "variant " + S[R["var"][i]] + "; total " + fmt(R.total[i]) + " ms" +
      (tree.fo !== undefined ? "; first output at " + fmt(tree.fo) + " ms" + (tree.fb ? " (a bound, not a measurement)" : "") : "") +
      (R.err[i] ? "; status ERROR" : "") +
      (R.ok[i] !== null ? "; outcome " + outcomeText(R.ok[i]) : "") +
      (R.verdict[i] !== null ? "; per-run limits " + verdictText(R.verdict[i], i) : "") +
      (R.trace[i] ? "; trace " + R.trace[i] : "")));
    var link = jaegerLink(R.trace[i], null, "cl-jaeger-run", "open in Jaeger");
    if (link) { facts.appendChild(document.createTextNode(" ")); facts.appendChild(link); }
    head.appendChild(facts);
    if (tree.v.length) {
      var broke = el("ul", { "class": "cl-broke" });
      tree.v.forEach(function (v) { broke.appendChild(el("li", null, v[1] + " (on " + S[spans[v[0]][0]] + ")")); });
      head.appendChild(broke);
    }
    if (tree.q) {
      var toggle = el("p", { "class": "cl-path-toggle", role: "group", "aria-label": "Critical path drawn" });
      toggle.appendChild(el("span", null, "draw the critical path "));
      [["turn", "of the whole turn"], ["output", "to the first output"]].forEach(function (choice) {
        var button = el("button", { type: "button", "data-path": choice[0], "aria-pressed": state.path === choice[0] ? "true" : "false" }, choice[1]);
        button.addEventListener("click", function () { state.path = choice[0]; selectRun(state.run, why); });
        toggle.appendChild(button);
      });
      head.appendChild(toggle);
    }
    var output = drawsOutput(tree);
    var path = el("p", { "class": "cl-path-line" });
    path.appendChild(el("span", null, output ? "critical path to the first output (" + fmt(tree.fo) + " ms" + (tree.fb ? ", a bound" : "") + "): " : "critical path: "));
    var list = el("ol", { id: "cl-path", "data-path": output ? "output" : "turn" });
    (output ? tree.o : tree.p).forEach(function (p) { list.appendChild(el("li", { "data-span": p[0] }, S[p[1]])); });
    path.appendChild(list);
    head.appendChild(path);
    renderWaterfall(i);
    $("cl-detail").textContent = "";
  }

  // The path to the first output is drawn when asked for and the run has one.
  function drawsOutput(tree) { return state.path === "output" && !!tree.q; }
  // Per span (row index), the stretches of the path drawn: the whole run's (s[6]) or the
  // path to the first output (tree.q, [row, start, end] in time order).
  function pathPieces(tree) {
    var by = {};
    if (drawsOutput(tree)) tree.q.forEach(function (q) { (by[q[0]] = by[q[0]] || []).push([q[1], q[2]]); });
    else tree.s.forEach(function (s, j) { if (s[6]) by[j] = s[6]; });
    return by;
  }
  function onPathFlag(tree) { return drawsOutput(tree) ? TO_OUTPUT : ON_PATH; }

  function pct(x, total) { return (total > 0 ? Math.max(0, Math.min(100, 100 * x / total)) : 0) + "%"; }

  function renderWaterfall(i) {
    var tree = T[i], spans = tree.s, depth = depthOf(spans);
    var total = Math.max(spans[0][4], 1e-9);
    var box = $("cl-waterfall");
    box.textContent = "";
    var scale = el("div", { "class": "cl-row cl-scale", "aria-hidden": "true" });
    scale.appendChild(el("div", { "class": "cl-name" }, "span"));
    var ticks = el("div", { "class": "cl-track" });
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      ticks.appendChild(el("span", { "class": "cl-tick", style: "left:" + f * 100 + "%" }, fmt(f * spans[0][4])));
    });
    scale.appendChild(ticks);
    scale.appendChild(el("div", { "class": "cl-dur" }, "ms"));
    box.appendChild(scale);
    var marks = {};
    tree.v.forEach(function (v) { (marks[v[0]] = marks[v[0]] || []).push(v[1]); });
    var pieces = pathPieces(tree), flag = onPathFlag(tree);
    var onText = drawsOutput(tree) ? ", on the critical path to the first output" : ", on the critical path";
    box.setAttribute("data-path", drawsOutput(tree) ? "output" : "turn");
    for (var j = 0; j < spans.length; j++) {
      var s = spans[j], kind = KINDS[s[1]];
      var row = el("div", {
        "class": "cl-row" + (s[9] & flag ? " cl-critical" : "") + (s[9] & ERROR ? " cl-error" : ""),
        role: "treeitem", tabindex: j === 0 ? "0" : "-1", "aria-level": depth[j] + 1,
        "data-span": j, "data-kind": kind, "data-critical": s[9] & flag ? "true" : null,
        "aria-label": S[s[0]] + ", " + kind + ", " + fmt(s[4]) + " ms" + (s[9] & flag ? onText : "")
      });
      var name = el("div", { "class": "cl-name", style: "padding-left:" + (depth[j] * 1.1 + 0.2) + "em" }, S[s[0]]);
      row.appendChild(name);
      var track = el("div", { "class": "cl-track" });
      var bar = el("div", { "class": "cl-bar cl-k-" + kind, style: "left:" + pct(s[3], total) + ";width:" + pct(s[4], total) });
      if (s[7] && s[4] > 0) {
        s[7].forEach(function (p) {
          var label = S[p[0]];
          bar.appendChild(el("span", {
            "class": "cl-part cl-p-" + label.replace(/ /g, "-"), style: "width:" + pct(p[1], s[4]),
            title: label + " " + fmt3(p[1]) + " ms"
          }));
        });
      }
      track.appendChild(bar);
      if (pieces[j]) pieces[j].forEach(function (c) {
        track.appendChild(el("div", { "class": "cl-cp" + (drawsOutput(tree) ? " cl-cp-fo" : ""), style: "left:" + pct(c[0], total) + ";width:" + pct(c[1] - c[0], total), title: drawsOutput(tree) ? "critical path to the first output" : "critical path" }));
      });
      if (s[8] !== null) track.appendChild(el("div", { "class": "cl-ttft", style: "left:" + pct(s[3] + s[8], total), title: "first token at " + fmt(s[8]) + " ms" }));
      if (tree.fo !== undefined) track.appendChild(el("div", { "class": "cl-fo", style: "left:" + pct(tree.fo, total), title: tree.fb ? "first output (a bound)" : "first output" }));
      row.appendChild(track);
      var dur = el("div", { "class": "cl-dur" }, fmt(s[4]));
      row.appendChild(dur);
      if (marks[j]) {
        row.classList.add("cl-broken");
        row.appendChild(el("div", { "class": "cl-mark" }, "\u26a0 " + marks[j].join("; ")));
      }
      box.appendChild(row);
    }
  }

  function openSpan(j) {
    var i = state.run, tree = T[i], s = tree.s[j];
    state.span = j;
    document.querySelectorAll("#cl-waterfall .cl-row[data-span]").forEach(function (row) {
      var on = +row.getAttribute("data-span") === j;
      row.setAttribute("aria-selected", on ? "true" : "false");
      row.setAttribute("tabindex", on ? "0" : "-1");
    });
    var box = $("cl-detail");
    box.textContent = "";
    box.setAttribute("data-span", j);
    box.appendChild(el("h3", null, S[s[0]]));
    var onPath = 0, drawn = pathPieces(tree)[j], output = drawsOutput(tree);
    if (drawn) drawn.forEach(function (c) { onPath += c[1] - c[0]; });
    var facts = el("dl");
    function fact(k, v, attrs) { facts.appendChild(el("dt", null, k)); facts.appendChild(el("dd", attrs || null, v)); }
    fact("kind", KINDS[s[1]]);
    fact("start", fmt3(s[3]) + " ms");
    fact("duration", fmt3(s[4]) + " ms", { id: "cl-duration", "data-ms": s[4] });
    fact(output ? "on the critical path to the first output" : "on the critical path",
         fmt3(onPath) + " ms" + (s[9] & onPathFlag(tree) ? " (a step on the path)" : ""), { id: "cl-on-path", "data-ms": onPath });
    if (s[8] !== null) fact("first token", fmt3(s[8]) + " ms after its start");
    if (s[9] & CACHED) fact("cache", "hit");
    if (s[9] & ERROR) fact("status", "ERROR");
    box.appendChild(facts);
    if (s[7]) {
      var parts = el("table", { id: "cl-parts" });
      parts.appendChild(el("caption", null, "Where the call's time went"));
      var body = el("tbody"), sum = 0;
      s[7].forEach(function (p) {
        var row = el("tr", { "data-part": S[p[0]], "data-ms": p[1] });
        var swatch = el("td");
        swatch.appendChild(el("span", { "class": "cl-swatch cl-p-" + S[p[0]].replace(/ /g, "-") }));
        swatch.appendChild(document.createTextNode(S[p[0]]));
        row.appendChild(swatch);
        row.appendChild(el("td", { "class": "n" }, fmt3(p[1]) + " ms"));
        body.appendChild(row);
        sum += p[1];
      });
      parts.appendChild(body);
      var foot = el("tfoot"), total = el("tr");
      total.appendChild(el("td", null, "sum"));
      total.appendChild(el("td", { "class": "n" }, fmt3(sum) + " ms"));
      foot.appendChild(total); parts.appendChild(foot);
      box.appendChild(parts);
    }
    var link = jaegerLink(R.trace[i], s[10], "cl-jaeger-span", "this span in Jaeger");
    if (link) box.appendChild(el("p")).appendChild(link);
    if (s[5]) {
      var table = el("table", { "class": "cl-attrs" });
      table.appendChild(el("caption", null, "Attributes (as read; none that could hold a credential)"));
      var tb = el("tbody");
      s[5].slice().sort(function (a, b) {
        var x = S[D.pairs[a][0]], y = S[D.pairs[b][0]];
        return x < y ? -1 : x > y ? 1 : 0;
      }).forEach(function (k) {
        var pair = D.pairs[k], row = el("tr");
        row.appendChild(el("th", { scope: "row" }, S[pair[0]]));
        var v = pair[1];
        row.appendChild(el("td", null, typeof v === "string" ? v : JSON.stringify(v)));
        tb.appendChild(row);
      });
      table.appendChild(tb);
      box.appendChild(table);
    }
  }

  // --- events -------------------------------------------------------------------------------

  function onFilter(key, id, event) {
    $(id).addEventListener(event, function (e) { state[key] = e.target.value; state.shown = PAGE; renderTable(); });
  }
  onFilter("wf", "cl-f-workflow", "change");
  onFilter("variant", "cl-f-variant", "change");
  onFilter("verdict", "cl-f-verdict", "change");
  onFilter("status", "cl-f-status", "change");
  onFilter("trace", "cl-f-trace", "input");
  $("cl-runs").tHead.addEventListener("click", function (e) {
    var button = e.target.closest("button[data-sort]");
    if (!button) return;
    var key = button.getAttribute("data-sort");
    state.dir = key === state.key ? -state.dir : (key === "total" || key === "fo" || key === "verdict" ? -1 : 1);
    state.key = key;
    renderTable();
  });
  document.querySelectorAll("#explorer button[data-pick]").forEach(function (b) {
    b.addEventListener("click", function () { pick(b.getAttribute("data-pick")); });
  });
  function moveFocus(row, step, selector) {
    var rows = Array.prototype.slice.call(document.querySelectorAll(selector));
    var k = rows.indexOf(row) + step;
    if (k >= 0 && k < rows.length) { rows[k].focus(); return rows[k]; }
    return null;
  }
  var body = $("cl-runs").tBodies[0];
  body.addEventListener("click", function (e) {
    var row = e.target.closest("tr[data-run]");
    if (row) selectRun(+row.getAttribute("data-run"));
  });
  body.addEventListener("keydown", function (e) {
    var row = e.target.closest("tr[data-run]");
    if (!row) return;
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); selectRun(+row.getAttribute("data-run")); }
    else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      var next = moveFocus(row, e.key === "ArrowDown" ? 1 : -1, "#cl-runs tbody tr[data-run]");
      if (next) { row.setAttribute("tabindex", "-1"); next.setAttribute("tabindex", "0"); }
    }
  });
  var fall = $("cl-waterfall");
  fall.addEventListener("click", function (e) {
    var row = e.target.closest(".cl-row[data-span]");
    if (row) openSpan(+row.getAttribute("data-span"));
  });
  fall.addEventListener("keydown", function (e) {
    var row = e.target.closest(".cl-row[data-span]");
    if (!row) return;
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openSpan(+row.getAttribute("data-span")); }
    else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      var next = moveFocus(row, e.key === "ArrowDown" ? 1 : -1, "#cl-waterfall .cl-row[data-span]");
      if (next) { row.setAttribute("tabindex", "-1"); next.setAttribute("tabindex", "0"); }
    }
  });

  // --- charts in dark mode ------------------------------------------------------------------

  var dark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function theme() {
    if (!window.Plotly) return;
    var on = dark && dark.matches, ink = on ? "#e6e6e6" : "#2a3f5f", grid = on ? "#3a3f47" : "#e5ecf6";
    document.querySelectorAll(".js-plotly-plot").forEach(function (chart) {
      window.Plotly.relayout(chart, {
        paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: on ? "#1f2329" : "#e5ecf6",
        "font.color": ink, "xaxis.gridcolor": on ? grid : "white", "yaxis.gridcolor": on ? grid : "white"
      });
    });
  }
  if (dark) {
    if (dark.addEventListener) dark.addEventListener("change", theme);
    window.addEventListener("load", theme);
  }

  renderTable();
  if (N) pick("slowest");
  if (window.performance && performance.mark) performance.mark("chainlat-explorer-ready");
})();
