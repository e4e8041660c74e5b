/* Hermes views of the fleetops report site: Fleet now, Trends, Repairs, and each host's audits. */
"use strict";
(function (S) {
  var h = S.h, add = S.add;
  var VERDICT_COLORS = {healthy: "#2e7d32", fts_index_damage: "#f9a825", index_damage: "#ef6c00",
    structural_corruption: "#c62828", unreadable: "#8e0000", retired_wal: "#6a1b9a", not_persisting: "#d84315", missing: "#757575",
    unreachable: "#ad1457", audit_failed: "#d81b60"};
  var OUTCOME_COLORS = {"REPAIRED": "#2e7d32", "ROLLED BACK": "#ef6c00", "REFUSED": "#f9a825",
    "FAILED": "#c62828", "NOT SWAPPED": "#757575", "UNREACHABLE": "#ad1457"};

  function outcomeBadge(o) { return h("span", {"class": "badge o-" + o.replace(/ /g, "_"), text: o}); }
  function archCell(r) {   // what the host is: its architecture, the rest on hover
    var s = r.system;
    if (!s || !s.arch) return "-";
    return h("span", {title: [[s.os_id, s.os_version].join(" "), "kernel " + s.kernel, "Python " + s.python,
      "SQLite " + s.sqlite].join(", "), text: s.arch});
  }
  function errorsText(by) {
    var items = Object.keys(by || {}).map(function (k) { return [k, by[k]]; });
    items.sort(function (a, b) { return b[1] - a[1] || (a[0] < b[0] ? -1 : 1); });
    var text = items.slice(0, 4).map(function (kv) { return kv[1] + " " + kv[0]; }).join(", ");
    return items.length > 4 ? text + ", +" + (items.length - 4) + " more" : (text || "-");
  }
  function markOf(m) {
    var o = m.outcomes, worst = o["ROLLED BACK"] ? "ROLLED BACK" : o["FAILED"] ? "FAILED" : o["REPAIRED"] ? "REPAIRED" :
      Object.keys(o)[0];
    var label = Object.keys(o).map(function (k) { return o[k] + " " + k.toLowerCase(); }).join(", ");
    return {x: m.started, color: OUTCOME_COLORS[worst] || "#555", label: label};
  }

  // --- Fleet now -------------------------------------------------------------------------------

  S.pages.index = function (app, d) {
    var verdict = h("select", {id: "f-verdict"}, h("option", {value: "", text: "any verdict"}),
      Object.keys(d.counts).map(function (v) { return h("option", {value: v, text: v + " (" + d.counts[v] + ")"}); }));
    var group = h("select", {id: "f-group"}, h("option", {value: "", text: "any group"}),
      d.groups.map(function (g) { return h("option", {value: g, text: g}); }));
    var txt = h("input", {id: "f-text", type: "search", placeholder: "host, profile, path, warning…"});
    var chips = Object.keys(d.counts).map(function (v) {
      return h("a", {href: "#", "class": "chip", "data-verdict": v, style: "border-color:" + (VERDICT_COLORS[v] || "#555"),
        onclick: function (e) { e.preventDefault(); verdict.value = verdict.value === v ? "" : v; t.refresh(); }},
        h("b", {"class": "n", text: d.counts[v]}), " ", S.badge(v));
    });
    add(app, [h("h1", {text: "Fleet now"}),
      h("p", {"class": "meta", text: d.rows.length + " databases on " + d.hosts + " hosts, from the newest audit of each host" +
        (d.newest ? " (newest run " + d.newest + ", " + d.audit_runs + " audit runs)" : " (no audit recorded)")}),
      h("div", {"class": "summary chips", id: "counts"}, chips),
      S.filterBar([verdict, group, txt])]);
    var box = h("div");
    app.appendChild(box);
    var t = S.table(box, {
      rows: d.rows,
      rowClass: function (r) { return "row-" + r.verdict; },
      columns: [
        {key: "host", label: "host", cls: "id", render: function (r) { return S.link("host", r.host, r.host); }},
        {key: "profile", label: "profile", cls: "id"},
        {key: "arch", label: "arch", render: archCell},
        {key: "verdict", label: "verdict", render: function (r) { return S.badge(r.verdict); }},
        {key: "errors_total", label: "errors by object", desc: true,
          render: function (r) { return errorsText(r.errors_by_object); }},
        {key: "persisting", label: "persisting", render: function (r) {
          if (!r.persisting) return "-";
          return h("span", {"class": "p-" + r.persisting, text: r.persisting +
            (r.write_errors ? " (" + r.write_errors + " write errors)" : "")});
        }},
        {key: "holders", label: "holders", render: function (r) {   // the whole list on hover
          var t = r.holders || "-";
          return t.length <= 110 ? t : h("span", {title: t, text: t.slice(0, 107) + "…"});
        }},
        {key: "backup_age_hours", label: "backup age", cls: "num", render: function (r) { return S.fmtAge(r.backup_age_hours); }},
        {key: "wal_bytes", label: "WAL", cls: "num", desc: true, render: function (r) { return S.fmtMB(r.wal_bytes); }},
        {key: "warnings", label: "warnings", render: function (r) { return (r.warnings || []).join(", ") || "-"; }},
        {key: "run_id", label: "audited", cls: "id", render: function (r) { return S.link("run", r.run_id, r.run_id); }}],
      filter: function () {
        var v = verdict.value, g = group.value, q = txt.value.toLowerCase();
        if (!v && !g && !q) return null;
        return function (r) {
          return (!v || r.verdict === v) && (!g || r.groups.indexOf(g) >= 0) &&
            (!q || [r.host, r.profile, (r.system || {}).arch, r.db, r.verdict, r.holders, (r.warnings || []).join(" "), (r.reasons || []).join(" ")]
              .join(" ").toLowerCase().indexOf(q) >= 0);
        };
      }
    });
    [verdict, group].forEach(function (el) { el.addEventListener("change", t.refresh); });
    txt.addEventListener("input", t.refresh);
  };

  // --- Trends ----------------------------------------------------------------------------------

  function hostCharts(box, hd, marks) {
    var audits = hd.audits || [];
    var profiles = [], runs = [], seen = {};
    audits.forEach(function (a) {
      if (profiles.indexOf(a[2]) < 0) profiles.push(a[2]);
      if (!(a[0] in seen)) { seen[a[0]] = runs.length; runs.push(a[1]); }
    });
    var wal = profiles.map(function () { return runs.map(function () { return null; }); });
    var age = profiles.map(function () { return runs.map(function () { return null; }); });
    audits.forEach(function (a) {
      var p = profiles.indexOf(a[2]), i = seen[a[0]];
      wal[p][i] = a[5] === null ? null : a[5] / 1048576;
      age[p][i] = a[6];
    });
    var series = profiles.map(function (p) { return {label: p}; });
    S.chart(box, {title: "WAL size, MB: " + hd.host, x: runs, ys: wal, series: series, marks: marks, ylabel: "MB"});
    S.chart(box, {title: "newest verified backup age, hours: " + hd.host, x: runs, ys: age, series: series,
      marks: marks, ylabel: "hours"});
  }

  S.pages.trends = function (app, d) {
    var x = d.runs.map(function (r) { return r.started; });
    var marks = d.marks.map(markOf);
    add(app, [h("h1", {text: "Trends"}),
      h("p", {"class": "meta", text: d.runs.length + " audit runs · " + d.marks.length +
        " repair or rollback runs marked on the time axis (dashed lines)"})]);
    var box = h("div", {id: "charts"});
    app.appendChild(box);
    if (!d.runs.length) { add(box, h("p", {text: "no audit runs recorded"})); return; }
    // healthy on its own axis (right): a thousand healthy databases would flatten the damaged ones
    S.chart(box, {title: "databases by verdict (healthy: right axis)", x: x, marks: marks, ylabel: "not healthy",
      rlabel: "healthy",
      series: d.verdicts.map(function (v) { return {label: v, color: VERDICT_COLORS[v], scale: v === "healthy" ? "r" : "y"}; }),
      ys: d.verdicts.map(function (v) { return d.runs.map(function (r) { return r.counts[v] || 0; }); })});
    S.chart(box, {title: "total errors (integrity and index checks)", x: x, marks: marks, ylabel: "errors",
      series: [{label: "errors", color: "#c62828"}], ys: [d.runs.map(function (r) { return r.errors; })]});
    var list = h("datalist", {id: "hostnames"}, d.hosts.map(function (hk) { return h("option", {value: hk[0]}); }));
    var pick = h("input", {id: "f-host", list: "hostnames", value: d.default_host || "", placeholder: "host"});
    var per = h("div", {id: "host-charts"});
    add(app, [h("h2", {text: "Per host"}), S.filterBar([h("label", null, "host ", pick), list]), per]);
    function show() {
      var hk = d.hosts.filter(function (x) { return x[0] === pick.value; })[0];
      if (!hk) return;
      S.load("host/" + hk[1]).then(function (hd) { S.clear(per); hostCharts(per, hd, marks); }).catch(S.fail);
    }
    pick.addEventListener("change", show);
    show();
    if (d.marks.length) {
      add(app, [h("h2", {text: "Repair and rollback runs"}), h("ul", {"class": "marks"}, d.marks.map(function (m) {
        return h("li", null, S.link("run", m.run_id, m.run_id), " " + S.fmtTime(m.started) + ": ",
          Object.keys(m.outcomes).map(function (o) { return [outcomeBadge(o), " " + m.outcomes[o] + " "]; }));
      }))]);
    }
  };

  // --- Repairs ---------------------------------------------------------------------------------

  function repairsTable(box, rows, withHost) {
    return S.table(box, {rows: rows, columns: [
      {key: "run_id", label: "run", cls: "id", render: function (r) { return S.link("run", r.run_id, r.run_id); }},
      {key: "started", label: "when", cls: "nowrap", desc: true, render: function (r) { return S.fmtTime(r.started); }},
      withHost ? {key: "host", label: "host", cls: "id", render: function (r) { return S.link("host", r.host, r.host); }} : null,
      {key: "profile", label: "profile", cls: "id"},
      {key: "outcome", label: "outcome", render: function (r) { return outcomeBadge(r.outcome); }},
      {key: "verdict_before", label: "verdict before", render: function (r) { return r.verdict_before ? S.badge(r.verdict_before) : "-"; }},
      {key: "path", label: "path"},
      {key: "loss_rows", label: "rows lost", cls: "num"},
      {key: "detail", label: "detail", cls: "detail"},
      {key: "evidence", label: "evidence", render: function (r) {
        return (r.evidence || []).length ? r.evidence.map(function (e) {
          return h("div", null, h("a", {href: e.href, "class": "evidence", text: e.name}), " ", h("span", {"class": "dim", text: S.fmtSize(e.bytes)}));
        }) : "-";
      }}].filter(Boolean)});
  }

  S.pages.repairs = function (app, d) {
    var outcome = h("select", {id: "f-outcome"}, h("option", {value: "", text: "any outcome"}),
      Object.keys(d.counts).map(function (o) { return h("option", {value: o, text: o + " (" + d.counts[o] + ")"}); }));
    var txt = h("input", {id: "f-text", type: "search", placeholder: "host, profile, detail…"});
    add(app, [h("h1", {text: "Repairs"}),
      h("div", {"class": "summary chips", id: "counts"}, h("b", {text: d.repairs.length + " outcomes"}), " ",
        Object.keys(d.counts).map(function (o) { return [outcomeBadge(o), " " + d.counts[o] + " "]; })),
      S.filterBar([outcome, txt])]);
    var box = h("div");
    app.appendChild(box);
    var all = d.repairs;
    var t = repairsTable(box, all, true);
    function refilter() {
      var o = outcome.value, q = txt.value.toLowerCase();
      t = repairsTable(box, all.filter(function (r) {
        return (!o || r.outcome === o) && (!q || [r.host, r.profile, r.detail, r.path, r.verdict_before].join(" ")
          .toLowerCase().indexOf(q) >= 0);
      }), true);
    }
    outcome.addEventListener("change", refilter);
    txt.addEventListener("input", refilter);
  };

  // --- a host's own page -------------------------------------------------------------------------

  S.hostSections.push(function (app, hd) {
    var audits = hd.audits || [];
    if (audits.length) {
      var latest = audits[audits.length - 1];
      add(app, h("p", {"class": "summary", id: "host-now"}, "newest audit " + S.fmtTime(latest[1]) + ": ",
        audits.filter(function (a) { return a[0] === latest[0]; }).map(function (a) {
          return [h("span", {"class": "id", text: a[2]}), " ", S.badge(a[3]), " "];
        })));
      var marks = (hd.repairs || []).map(function (r) {
        return {x: r.started, color: OUTCOME_COLORS[r.outcome] || "#555", label: r.outcome.toLowerCase()};
      });
      var charts = h("div");
      app.appendChild(charts);
      hostCharts(charts, hd, marks);
      add(app, h("h2", {text: "Audits (" + audits.length + ")"}));
      var box = h("div");
      app.appendChild(box);
      S.table(box, {sort: "started", desc: true, rows: audits.map(function (a) {
        return {run_id: a[0], started: a[1], profile: a[2], verdict: a[3], errors: a[4], wal: a[5], age: a[6],
                system: a[7]};
      }), columns: [
        {key: "run_id", label: "run", cls: "id", render: function (r) { return S.link("run", r.run_id, r.run_id); }},
        {key: "started", label: "when", cls: "nowrap", render: function (r) { return S.fmtTime(r.started); }},
        {key: "profile", label: "profile", cls: "id"},
        {key: "arch", label: "arch", render: archCell},
        {key: "verdict", label: "verdict", render: function (r) { return S.badge(r.verdict); }},
        {key: "errors", label: "errors", cls: "num"},
        {key: "wal", label: "WAL", cls: "num", render: function (r) { return S.fmtMB(r.wal); }},
        {key: "age", label: "backup age", cls: "num", render: function (r) { return S.fmtAge(r.age); }}]});
    }
    if ((hd.repairs || []).length) {
      add(app, h("h2", {text: "Repairs and rollbacks (" + hd.repairs.length + ")"}));
      var rbox = h("div");
      app.appendChild(rbox);
      repairsTable(rbox, hd.repairs, false);
    }
  });
})(Site);
