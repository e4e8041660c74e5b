/* fleetops report site: data loading, DOM helpers, paged tables, charts (uPlot), and the
   Runs / Run / Hosts / Host pages. Every string from the store goes in as text, never as HTML. */
"use strict";
var Site = (function () {
  var data = {}, waiting = {}, pages = {}, hostSections = [];
  var PAGE = 100;
  var STATUS_ORDER = ["failed", "unreachable", "rescued", "ignored", "changed", "ok", "skipped"];

  function put(key, obj) {
    data[key] = obj;
    (waiting[key] || []).forEach(function (w) { w.resolve(obj); });
    delete waiting[key];
  }

  /* data/<key>.js through a <script> tag: the one way a file:// page may read a sibling file. */
  function load(key) {
    if (key in data) return Promise.resolve(data[key]);
    return new Promise(function (resolve, reject) {
      var first = !waiting[key];
      (waiting[key] = waiting[key] || []).push({resolve: resolve, reject: reject});
      if (!first) return;
      var s = document.createElement("script");
      s.src = "data/" + key.split("/").map(encodeURIComponent).join("/") + ".js";
      s.onerror = function () {
        (waiting[key] || []).forEach(function (w) { w.reject(new Error("no data file for " + key)); });
        delete waiting[key];
      };
      document.body.appendChild(s);
    });
  }

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") el.textContent = v;
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    });
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) { kid.forEach(function (k) { add(el, k); }); return; }
    el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function fmtTime(ts) {
    if (!ts) return "-";
    var d = new Date(ts * 1000);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + " UTC";
  }
  function fmtDur(s) {
    if (s === null || s === undefined) return "-";
    if (s < 10) return s.toFixed(2) + " s";
    if (s < 600) return s.toFixed(1) + " s";
    return (s / 60).toFixed(1) + " min";
  }
  function fmtMB(b) { return b === null || b === undefined ? "-" : (b / 1048576).toFixed(1) + " MB"; }
  function fmtSize(b) { return b < 1048576 ? (b / 1024).toFixed(1) + " KB" : fmtMB(b); }
  function fmtAge(hours) {
    if (hours === null || hours === undefined) return "none";
    return hours < 48 ? hours.toFixed(1) + " h" : (hours / 24).toFixed(1) + " d";
  }
  function param() { return decodeURIComponent(location.hash.replace(/^#/, "")); }
  function link(page, key, text) { return h("a", {href: page + ".html#" + encodeURIComponent(key), text: text}); }
  function badge(word, kind) { return h("span", {"class": "badge " + (kind || "v") + "-" + word, text: word}); }

  /* Filterable, sortable, paged table: only one page of rows is ever in the DOM. */
  function table(el, opts) {
    var state = {page: 0, sort: opts.sort || null, desc: !!opts.desc};
    var rows = opts.rows, shown = rows;
    var wrap = h("div", {"class": "tablewrap"});
    var info = h("div", {"class": "pager"});
    clear(el); add(el, [wrap, info]);
    function refresh(resetPage) {
      var f = opts.filter ? opts.filter() : null;
      shown = f ? rows.filter(f) : rows.slice();
      if (state.sort) {
        var col = opts.columns.filter(function (c) { return c.key === state.sort; })[0];
        var val = col.value || function (r) { return r[col.key]; };
        shown.sort(function (a, b) {
          var x = val(a), y = val(b);
          if (x === y) return 0;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : 1) * (state.desc ? -1 : 1);
        });
      }
      if (resetPage) state.page = 0;
      var size = opts.pageSize || api.PAGE_SIZE || PAGE, pages = Math.max(1, Math.ceil(shown.length / size));
      if (state.page >= pages) state.page = pages - 1;
      var from = state.page * size, part = shown.slice(from, from + size);
      var head = h("tr", null, opts.columns.map(function (c) {
        return h("th", {"class": c.cls, title: "sort", onclick: function () {
          if (state.sort === c.key) state.desc = !state.desc; else { state.sort = c.key; state.desc = !!c.desc; }
          refresh(false);
        }}, c.label, state.sort === c.key ? (state.desc ? " ▼" : " ▲") : "");
      }));
      var body = h("tbody", null, part.map(function (r) {
        return h("tr", {"class": opts.rowClass ? opts.rowClass(r) : null}, opts.columns.map(function (c) {
          var v = c.render ? c.render(r) : r[c.key];
          return h("td", {"class": c.cls}, v === null || v === undefined ? "-" : v);
        }));
      }));
      clear(wrap).appendChild(h("table", {"class": "grid", "data-rows": shown.length}, h("thead", null, head), body));
      clear(info);
      add(info, [
        h("button", {disabled: state.page === 0, onclick: function () { state.page--; refresh(false); }, text: "‹ prev"}),
        h("span", {"class": "count", text: shown.length ? (from + 1) + "–" + (from + part.length) + " of " +
          shown.length + (shown.length !== rows.length ? " (filtered from " + rows.length + ")" : "") : "no rows"}),
        h("button", {disabled: state.page >= pages - 1, onclick: function () { state.page++; refresh(false); },
          text: "next ›"})]);
    }
    refresh(true);
    return {refresh: function () { refresh(true); }, shown: function () { return shown; }};
  }

  /* A horizontal bar of status counts ("ok on 997, failed on 3"). */
  function statusBar(counts) {
    var total = 0;
    STATUS_ORDER.forEach(function (k) { total += counts[k] || 0; });
    var bar = h("div", {"class": "sbar"});
    STATUS_ORDER.forEach(function (k) {
      if (!counts[k]) return;
      bar.appendChild(h("span", {"class": "s-" + k, style: "width:" + (100 * counts[k] / total) + "%",
        title: k + " on " + counts[k]}));
    });
    return bar;
  }
  function statusWords(counts) {
    return STATUS_ORDER.filter(function (k) { return counts[k]; })
      .map(function (k) { return k + " on " + counts[k]; }).join(", ") || "no results";
  }

  var PALETTE = ["#2e7d32", "#c62828", "#ef6c00", "#f9a825", "#6a1b9a", "#1565c0", "#757575", "#00838f", "#ad1457"];

  /* A uPlot time chart; `marks` are vertical lines on the time axis (repairs, rollbacks). */
  function chart(el, opts) {
    var box = h("div", {"class": "chart"});
    el.appendChild(box);
    var marks = opts.marks || [];
    var series = [{}].concat(opts.series.map(function (s, i) {
      return {label: s.label, stroke: s.color || PALETTE[i % PALETTE.length], width: 2, scale: s.scale || "y",
        spanGaps: true, points: {show: opts.x.length < 60}};
    }));
    var axes = [{}, {scale: "y", label: opts.ylabel || "", size: 60}];
    if (opts.series.some(function (s) { return s.scale === "r"; }))   // a second axis, on the right
      axes.push({scale: "r", side: 1, label: opts.rlabel || "", size: 60, grid: {show: false}});
    var width = Math.max(320, Math.min(1100, (el.clientWidth || 900) - 20));
    var plot = new uPlot({
      title: opts.title, width: width, height: opts.height || 220, series: series,
      axes: axes,
      scales: {x: {time: true}},
      hooks: {draw: [function (u) {
        var ctx = u.ctx;
        ctx.save();
        marks.forEach(function (m) {
          var x = Math.round(u.valToPos(m.x, "x", true));
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
          ctx.strokeStyle = m.color || "#555";
          ctx.setLineDash([4, 3]);
          ctx.lineWidth = 2;
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
          ctx.fillStyle = m.color || "#555";
          ctx.font = (10 * devicePixelRatio) + "px sans-serif";
          ctx.fillText(m.label || "", x + 3, u.bbox.top + 12 * devicePixelRatio);
        });
        ctx.restore();
      }]}
    }, [opts.x].concat(opts.ys), box);
    box.setAttribute("data-series", opts.series.length);
    box.setAttribute("data-marks", marks.length);
    return plot;
  }

  function counters(c) {
    return ["ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"].map(function (k) {
      var n = c[k] || 0;
      return h("span", {"class": "ctr" + (n && k !== "ok" ? " c-" + k : "")}, k + " ", h("b", {text: n}));
    });
  }
  var COUNTER_COLS = ["ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"].map(function (k) {
    return {key: "c_" + k, label: k, cls: "num", desc: true,
      value: function (r) { return r.counters[k]; },
      render: function (r) { var n = r.counters[k] || 0; return h("span", {"class": n && k !== "ok" ? "c-" + k : null, text: n}); }};
  });

  function filterBar(fields) {
    return h("div", {"class": "filters"}, fields);
  }

  // --- Runs ------------------------------------------------------------------------------------

  pages.runs = function (app, d) {
    var statuses = {};
    d.runs.forEach(function (r) { statuses[r.status] = (statuses[r.status] || 0) + 1; });
    var sel = h("select", {id: "f-status"}, h("option", {value: "", text: "any status"}),
      Object.keys(statuses).map(function (s) { return h("option", {value: s, text: s + " (" + statuses[s] + ")"}); }));
    var txt = h("input", {id: "f-text", type: "search", placeholder: "run id, playbook, user…"});
    add(app, [h("h1", {text: "Runs"}),
      h("div", {"class": "summary", id: "counts"}, h("b", {text: d.runs.length + " runs"}),
        Object.keys(statuses).map(function (s) { return [" · ", badge(s, "r"), " " + statuses[s]]; })),
      filterBar([sel, txt])]);
    var box = h("div");
    app.appendChild(box);
    var t = table(box, {
      rows: d.runs,
      columns: [
        {key: "id", label: "run", render: function (r) { return link("run", r.id, r.id); }, cls: "id"},
        {key: "started", label: "started", render: function (r) { return fmtTime(r.started); }, cls: "nowrap", desc: true},
        {key: "status", label: "status", render: function (r) { return [badge(r.status, "r"), r.check ? " check" : ""]; }},
        {key: "playbook", label: "playbook", render: function (r) { return (r.playbook || "").split("/").pop(); }},
        {key: "user", label: "user@controller", render: function (r) { return (r.user || "?") + "@" + (r.controller || "?"); }},
        {key: "duration", label: "duration", render: function (r) { return fmtDur(r.duration); }, cls: "num"},
        {key: "hosts", label: "hosts", cls: "num", desc: true}].concat(COUNTER_COLS),
      filter: function () {
        var s = sel.value, q = txt.value.toLowerCase();
        if (!s && !q) return null;
        return function (r) {
          return (!s || r.status === s) && (!q || (r.id + " " + r.playbook + " " + r.user + " " + r.controller)
            .toLowerCase().indexOf(q) >= 0);
        };
      }
    });
    sel.addEventListener("change", t.refresh);
    txt.addEventListener("input", t.refresh);
  };

  // --- Run -------------------------------------------------------------------------------------

  pages.run = function (app, d) {
    var key = param() || (d.runs[0] && d.runs[0][1]);
    var match = d.runs.filter(function (r) { return r[0] === key || r[1] === key; })[0];
    if (!match) { add(app, h("p", {"class": "error", text: "no run " + key + " in this site"})); return; }
    load("run/" + match[1]).then(function (rd) { runPage(app, rd); }).catch(fail);
  };

  function runPage(app, rd) {
    var r = rd.run;
    add(app, [h("h1", null, "Run ", h("span", {"class": "id", text: r.id}), " ", badge(r.status, "r")),
      h("p", {"class": "meta", text: (r.playbook || "") + " · " + fmtTime(r.started) + " · " + fmtDur(r.duration) +
        " · " + (r.user || "?") + "@" + (r.controller || "?") + (r.exit_code !== null ? " · exit " + r.exit_code : "") +
        (r.check ? " · check mode" : "") + (r.status_note ? " · " + r.status_note : "")}),
      h("div", {"class": "summary"}, h("b", {text: r.hosts + " hosts"}), " ", counters(r.counters))]);
    rd.plays.forEach(function (p) {
      var sec = h("section", {"class": "play"});
      add(sec, [h("h2", {text: "Play " + p.index + ": " + (p.name || "")}),
        h("p", {"class": "meta", text: (p.host_count !== null ? p.host_count + " hosts · " : "") +
          fmtDur(p.ended && p.started ? p.ended - p.started : null)}),
        p.stopped_reason ? h("p", {"class": "error", text: "stopped: " + p.stopped_reason}) : null]);
      var tb = h("tbody");
      p.tasks.forEach(function (t) {
        var details = h("div", {"class": "hostlist", hidden: true},
          Object.keys(t.hosts).filter(function (s) { return s !== "ok"; }).map(function (s) {
            var more = t.counts[s] - t.hosts[s].length;
            return h("div", null, badge(s, "s"), " ", t.hosts[s].join(", "), more > 0 ? " … and " + more + " more" : "");
          }));
        tb.appendChild(h("tr", {"class": "task"},
          h("td", {"class": "num", text: t.index}),
          h("td", null, h("b", {text: t.name || ""}), h("span", {"class": "dim", text: " " + (t.module || "")})),
          h("td", {"class": "barcell"}, statusBar(t.counts)),
          h("td", null, h("a", {href: "#" + encodeURIComponent(param()), "class": "words", text: statusWords(t.counts),
            onclick: function (e) { e.preventDefault(); details.hidden = !details.hidden; }}), details),
          h("td", {"class": "num nowrap", title: "min / median / max",
            text: fmtDur(t.duration.median) + " (max " + fmtDur(t.duration.max) + ")"})));
      });
      sec.appendChild(h("table", {"class": "grid tasks"}, h("thead", null, h("tr", null,
        ["#", "task", "hosts", "outcome", "duration (median)"].map(function (c) { return h("th", {text: c}); }))), tb));
      app.appendChild(sec);
    });
    var present = {};
    rd.hosts.forEach(function (x) { present[x[3]] = (present[x[3]] || 0) + 1; });
    var sel = h("select", {id: "f-hstatus"}, h("option", {value: "", text: "any status"}),
      Object.keys(present).map(function (s) { return h("option", {value: s, text: s + " (" + present[s] + ")"}); }));
    var txt = h("input", {id: "f-htext", type: "search", placeholder: "host…"});
    var out = h("div", {"class": "result", id: "host-result"});
    add(app, [h("h2", {text: "Hosts"}), filterBar([sel, txt])]);
    var box = h("div");
    add(app, [box, out]);
    var rows = rd.hosts.map(function (x) { return {host: x[0], shard: x[1], counters: x[2], status: x[3]}; });
    var t = table(box, {
      rows: rows,
      columns: [
        {key: "host", label: "host", cls: "id", render: function (x) { return link("host", x.host, x.host); }},
        {key: "status", label: "status", render: function (x) { return badge(x.status, "s"); }}].concat(COUNTER_COLS, [
        {key: "json", label: "results", render: function (x) {
          return h("button", {"class": "show", "data-host": x.host, text: "show JSON",
            onclick: function () { showResults(out, rd, x); }});
        }}]),
      filter: function () {
        var s = sel.value, q = txt.value.toLowerCase();
        if (!s && !q) return null;
        return function (x) { return (!s || x.status === s) && (!q || x.host.toLowerCase().indexOf(q) >= 0); };
      }
    });
    sel.addEventListener("change", t.refresh);
    txt.addEventListener("input", t.refresh);
  }

  function showResults(out, rd, x) {
    clear(out).appendChild(h("p", {"class": "loading", text: "loading " + x.host + "…"}));
    load("run/" + rd.key + "/" + x.shard).then(function (shard) {
      var names = {};
      rd.plays.forEach(function (p) { p.tasks.forEach(function (t) { names[p.index + "/" + t.index] = t.name; }); });
      clear(out);
      add(out, [h("h3", null, "results of ", h("span", {"class": "id", text: x.host})),
        (shard[x.host] || []).map(function (r) {
          return h("details", {"class": "res"}, h("summary", null, badge(r[2], "s"),
            " " + r[0] + "." + r[1] + " " + (names[r[0] + "/" + r[1]] || "") + " · " + fmtDur(r[3])),
            h("pre", {text: JSON.stringify(r[4], null, 1)}));
        })]);
      out.scrollIntoView();
    }).catch(fail);
  }

  // --- Hosts -----------------------------------------------------------------------------------

  pages.hosts = function (app, d) {
    var txt = h("input", {id: "f-text", type: "search", placeholder: "host or group…"});
    add(app, [h("h1", {text: "Hosts"}), h("div", {"class": "summary", id: "counts"}, h("b", {text: d.hosts.length + " hosts"})),
      filterBar([txt])]);
    var box = h("div");
    app.appendChild(box);
    var cols = [{key: "host", label: "host", cls: "id", render: function (x) { return link("host", x.host, x.host); }}];
    if (d.hosts.some(function (x) { return x.verdict; })) {
      cols.push({key: "verdict", label: "worst verdict now", render: function (x) { return x.verdict ? badge(x.verdict) : "-"; }});
      cols.push({key: "profiles", label: "profiles", cls: "num"});
    }
    cols = cols.concat([
      {key: "groups", label: "groups", render: function (x) { return (x.groups || []).join(", "); }},
      {key: "runs", label: "runs", cls: "num", desc: true},
      {key: "last_started", label: "last run", cls: "nowrap", desc: true,
        render: function (x) { return x.last_run ? link("run", x.last_run, fmtTime(x.last_started)) : "-"; }},
      {key: "last_status", label: "last status", render: function (x) { return x.last_status ? badge(x.last_status, "s") : "-"; }}]);
    var t = table(box, {rows: d.hosts, columns: cols, filter: function () {
      var q = txt.value.toLowerCase();
      return q ? function (x) { return (x.host + " " + (x.groups || []).join(" ")).toLowerCase().indexOf(q) >= 0; } : null;
    }});
    txt.addEventListener("input", t.refresh);
  };

  // --- Host ------------------------------------------------------------------------------------

  pages.host = function (app, d) {
    var key = param();
    var match = d.hosts.filter(function (x) { return x[0] === key || x[1] === key; })[0];
    if (!match) { add(app, h("p", {"class": "error", text: key ? "no host " + key + " in this site" : "no host given"})); return; }
    load("host/" + match[1]).then(function (hd) {
      add(app, h("h1", null, "Host ", h("span", {"class": "id", text: hd.host})));
      hostSections.forEach(function (fn) { fn(app, hd); });
      add(app, h("h2", {text: "Runs (" + hd.runs.length + ")"}));
      var box = h("div");
      app.appendChild(box);
      table(box, {rows: hd.runs, columns: [
        {key: "run_id", label: "run", cls: "id", render: function (r) { return link("run", r.run_id, r.run_id); }},
        {key: "started", label: "started", cls: "nowrap", render: function (r) { return fmtTime(r.started); }},
        {key: "playbook", label: "playbook", render: function (r) { return (r.playbook || "").split("/").pop(); }},
        {key: "status", label: "status", render: function (r) { return badge(r.status, "s"); }}].concat(COUNTER_COLS)});
    }).catch(fail);
  };

  function fail(err) {
    console.error(err);
    document.getElementById("app").appendChild(h("p", {"class": "error", text: String(err && err.message || err)}));
  }

  function start(name) {
    var app = clear(document.getElementById("app"));
    try {
      pages[name](app, data["page/" + name]);
    } catch (e) { fail(e); }
    window.addEventListener("hashchange", function () {
      if (name === "run" || name === "host") { clear(app); pages[name](app, data["page/" + name]); }
    });
  }

  var api = {put: put, load: load, h: h, add: add, clear: clear, table: table, chart: chart, badge: badge,
    link: link, fmtTime: fmtTime, fmtDur: fmtDur, fmtMB: fmtMB, fmtSize: fmtSize, fmtAge: fmtAge, filterBar: filterBar,
    pages: pages, hostSections: hostSections, start: start, fail: fail, PALETTE: PALETTE, data: data};
  return api;
})();
