// hloscope report page: reads the JSON in #hloscope-data and draws the summary, the
// memory timeline and the kernel graph.  Every text from the module goes through
// textContent (never innerHTML).  No network, no libraries.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("hloscope-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var K = D.kernels, G = D.groups;
  var open = {}; open[D.top] = true;
  var selected = -1;

  function el(tag, attrs, text, parent) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }
  function sv(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function svText(x, y, text, attrs, parent) {
    var t = sv("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    t.textContent = String(text);
    return t;
  }
  function bytes(n) {
    if (n === null || n === undefined) return "unknown";
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, x = n;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return i === 0 ? n + " B" : x.toFixed(2) + " " + u[i];
  }
  function count(n) {
    if (n < 10000) return String(n);
    var s = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < s.length; i++) if (n >= s[i][0]) return (n / s[i][0]).toFixed(2) + " " + s[i][1];
    return String(n);
  }

  function exact(n) {
    if (n === null || n === undefined) return "unknown";
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",") + " B";
  }

  // -- the memory figures, labelled, and why they differ -----------------------
  function figures(F, box) {
    if (!F) return;
    el("h2", {}, "Memory figures", box);
    var t = el("table", {"class": "list", id: "memory-figures"}, null, box);
    var hr = el("tr", {}, null, t);
    ["figure", "size", "bytes", "where", "meaning", "from"].forEach(function (h) { el("th", {}, h, hr); });
    F.figures.forEach(function (f) {
      var tr = el("tr", {"data-key": f.key}, null, t);
      el("td", {}, f.label, tr); el("td", {"class": "num"}, bytes(f.bytes), tr);
      el("td", {"class": "num"}, exact(f.bytes), tr); el("td", {}, f.at || "", tr);
      el("td", {}, f.meaning, tr); el("td", {}, f.source, tr);
    });
    if (F.explanations.length) {
      el("h3", {}, "Why these figures differ", box);
      var ul = el("ul", {id: "memory-explanations"}, null, box);
      F.explanations.forEach(function (e) { el("li", {}, e.text, ul); });
    }
  }

  // -- summary ---------------------------------------------------------------
  function summary() {
    var s = D.summary, m = D.memory, box = document.getElementById("summary");
    el("h1", {}, "hloscope report: " + D.module, box);
    el("div", {"class": "file"}, D.file, box);
    var facts = [
      ["instructions", s.instructions],
      [D.optimized === false ? "kernels (if run as written: not optimized)" : "kernels", s.kernels],
      ["arrays between kernels", s.temporaries + " (" + bytes(s.temporary_bytes) + ")"],
      ["flops", count(s.flops)],
      ["devices", s.num_partitions + (s.partitioned ? " (partitioned: sizes are per device)" : "")],
      ["collectives", s.collectives.length]];
    if (D.xla) {
      facts.push(["XLA's dump files", (D.xla.allocations || 0) + " allocations, " + bytes(D.xla.total) + " in all"]);
      if (D.xla.recomputed_peak !== null) facts.push(["hloscope, replaying XLA's live ranges", bytes(D.xla.recomputed_peak)]);
    }
    var t = el("table", {"class": "facts"}, null, box);
    facts.forEach(function (f) {
      var tr = el("tr", {}, null, t); el("th", {}, f[0], tr); el("td", {}, f[1], tr);
    });
    figures(m.figures, box);
    el("h2", {}, "Live at the peak", box);
    var pt = el("table", {"class": "list", id: "peak-values"}, null, box);
    var hr = el("tr", {}, null, pt);
    ["value", "shape", "bytes", "kind", "op_name", "source"].forEach(function (h) { el("th", {}, h, hr); });
    m.peak_values.slice(0, 12).forEach(function (v) {
      var tr = el("tr", {"class": "clickable"}, null, pt);
      [v[0], v[1], bytes(v[2]), v[3], v[5], v[6]].forEach(function (c) { el("td", {}, c, tr); });
      tr.addEventListener("click", function () { findKernel(v[4]); });
    });
    if (s.collectives.length) {
      el("h2", {}, "Collectives", box);
      var ct = el("table", {"class": "list"}, null, box);
      s.collectives.forEach(function (c) {
        var tr = el("tr", {}, null, ct);
        [c[0], c[1], c[2], bytes(c[3]) + " sent per device", c[4]].forEach(function (x) { el("td", {}, x, tr); });
      });
    }
    el("h2", {}, "Advisor (" + D.findings.length + ")", box);
    var ul = el("ul", {"class": "findings"}, null, box);
    D.findings.forEach(function (f) {
      var li = el("li", {}, null, ul);
      el("b", {}, f.rule + " " + f.title + (f.count > 1 ? " (x" + f.count + ")" : ""), li);
      el("div", {"class": "saving"}, "saves " + f.saving, li);
      el("div", {}, f.message, li);
      el("div", {"class": "try"}, "try: " + f.suggestion, li);
    });
  }

  // -- memory timeline ---------------------------------------------------------
  function timeline() {
    var tl = D.memory.timeline, box = document.getElementById("timeline");
    el("h2", {}, "Memory over the schedule", box);
    if (!tl.length) { el("div", {"class": "info"}, "no timeline: the module is not in this input", box); return; }
    var W = 900, H = 180, L = 60, B = 24;
    var max = 0; tl.forEach(function (p) { if (p[2] > max) max = p[2]; });
    if (D.memory.peak > max) max = D.memory.peak;
    var svg = sv("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "timeline-svg"}, box);
    var n = tl.length, pts = [];
    function X(i) { return L + (W - L - 10) * i / Math.max(1, n); }
    function Y(v) { return 10 + (H - B - 10) * (1 - v / (max || 1)); }
    for (var i = 0; i < n; i++) { pts.push(X(i) + "," + Y(tl[i][2])); pts.push(X(i + 1) + "," + Y(tl[i][2])); }
    sv("polyline", {points: pts.join(" "), fill: "none", stroke: "#3b6ea8", "stroke-width": 1.5}, svg);
    svText(4, 14, bytes(max), {"font-size": 10}, svg);
    svText(4, H - B, "0", {"font-size": 10}, svg);
    svText(L, H - 6, "step 0", {"font-size": 10}, svg);
    svText(W - 80, H - 6, "step " + D.memory.steps, {"font-size": 10}, svg);
    var pi = 0;
    for (var j = 0; j < n; j++) if (tl[j][0] <= D.memory.peak_step && D.memory.peak_step <= tl[j][1]) pi = j;
    if (D.memory.peak !== null) {
      sv("line", {x1: X(pi + 0.5), x2: X(pi + 0.5), y1: 10, y2: H - B, stroke: "#c0392b", "stroke-dasharray": "4,3"}, svg);
      svText(X(pi + 0.5) + 4, 20, "peak " + bytes(D.memory.peak), {"font-size": 11, fill: "#c0392b"}, svg);
    }
    var cursor = sv("line", {x1: 0, x2: 0, y1: 10, y2: H - B, stroke: "#888", visibility: "hidden"}, svg);
    var info = el("div", {id: "timeline-info", "class": "info"}, "hover the timeline to see what is live", box);
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var x = (ev.clientX - r.left) * W / r.width;
      var i = Math.max(0, Math.min(n - 1, Math.floor((x - L) / (W - L - 10) * n)));
      cursor.setAttribute("x1", X(i + 0.5)); cursor.setAttribute("x2", X(i + 0.5));
      cursor.setAttribute("visibility", "visible");
      showLive(info, tl[i]);
    });
  }
  function showLive(info, p) {
    var step = p[0];
    info.textContent = "";
    el("div", {}, "steps " + p[0] + "-" + p[1] + ": up to " + bytes(p[2]) + " (" + p[3] + ")", info);
    var live = D.memory.values.filter(function (v) { return v[1] <= step && step <= v[2]; });
    live.sort(function (a, b) { return b[3] - a[3]; });
    var t = el("table", {"class": "list"}, null, info);
    live.slice(0, 8).forEach(function (v) {
      var tr = el("tr", {"class": "clickable"}, null, t);
      [v[0], bytes(v[3]), v[5], v[6]].forEach(function (c) { el("td", {}, c, tr); });
      tr.addEventListener("click", function () { findKernel(v[4]); });
    });
  }

  // -- the kernel graph ----------------------------------------------------------
  var depth = [], path = [];
  (function () {
    for (var g = 0; g < G.length; g++) { var d = 0, p = G[g].parent; while (p >= 0) { d++; p = G[p].parent; } depth[g] = d; }
    for (var k = 0; k < K.length; k++) {
      var chain = [], g2 = K[k].group; while (g2 >= 0) { chain.unshift(g2); g2 = G[g2].parent; }
      path[k] = chain;
    }
  })();
  // The item of group g that holds kernel k: "k<k>" itself, or "g<child>".
  function itemOf(g, k) {
    var chain = path[k], d = depth[g];
    if (chain[d] !== g) return null;
    if (chain.length === d + 1) return "k" + k;
    return "g" + chain[d + 1];
  }
  var BOX_W = 230, LINE = 14, GAP_X = 26, GAP_Y = 40, PADG = 12, TITLE = 20;
  function kernelLines(k) {
    var x = K[k], lines = [x.name, x.category + (x.fusion_kind ? " " + x.fusion_kind : "")];
    if (x.target) lines.push(x.target);
    if (x.fused) lines.push(x.fused.length > 34 ? x.fused.slice(0, 33) + "…" : x.fused);
    lines.push(x.shape.split("{")[0] + "  " + bytes(x.bytes));
    return lines;
  }
  function layout(g) {
    // Items: child groups (open ones laid out inside) and kernels; layered by the arrays between them.
    var items = G[g].groups.map(function (c) { return "g" + c; }).concat(G[g].kernels.map(function (k) { return "k" + k; }));
    var idx = {}, size = {}, sub = {};
    items.forEach(function (it, i) {
      idx[it] = i;
      if (it[0] === "g") {
        var c = +it.slice(1);
        if (open[c]) { sub[it] = layout(c); size[it] = [sub[it].w + 2 * PADG, sub[it].h + 2 * PADG + TITLE]; }
        else size[it] = [BOX_W, 3 * LINE + 12];
      } else size[it] = [BOX_W, kernelLines(+it.slice(1)).length * LINE + 10];
    });
    var succ = items.map(function () { return []; }), indeg = items.map(function () { return 0; }), links = [], seen = {};
    D.edges.forEach(function (e) {
      var a = itemOf(g, e[0]), b = itemOf(g, e[1]);
      if (a === null || b === null || a === b) return;
      var key = a + ">" + b;
      if (seen[key]) { seen[key][2] += e[3]; seen[key][3] = seen[key][3] || e[5]; return; }
      var l = [idx[a], idx[b], e[3], e[5], e[2], e[4]]; seen[key] = l; links.push(l);
      succ[idx[a]].push(idx[b]); indeg[idx[b]]++;
    });
    // What feeds a loop, branch or call: an arrow to its group.
    G[g].groups.forEach(function (c) {
      (G[c].inputs || []).forEach(function (k) {
        var a = itemOf(g, k), b = "g" + c;
        if (a === null || a === b || seen[a + ">" + b]) return;
        var l = [idx[a], idx[b], K[k].bytes, 0, K[k].shape, "temporary"]; seen[a + ">" + b] = l; links.push(l);
        succ[idx[a]].push(idx[b]); indeg[idx[b]]++;
      });
    });
    var layer = items.map(function () { return 0; }), queue = [], order = [];
    items.forEach(function (_, i) { if (!indeg[i]) queue.push(i); });
    while (queue.length) { var u = queue.shift(); order.push(u); succ[u].forEach(function (v) { layer[v] = Math.max(layer[v], layer[u] + 1); if (--indeg[v] === 0) queue.push(v); }); }
    items.forEach(function (_, i) { if (order.indexOf(i) < 0) { order.push(i); } });
    var rows = [];
    items.forEach(function (_, i) { (rows[layer[i]] = rows[layer[i]] || []).push(i); });
    var pos = items.map(function (_, i) { return i; });
    for (var sweep = 0; sweep < 2; sweep++) {
      rows.forEach(function (r, li) {
        if (!li || !r) return;
        var bary = {};
        r.forEach(function (i) {
          var s = 0, c = 0;
          links.forEach(function (l) { if (l[1] === i) { s += pos[l[0]]; c++; } });
          bary[i] = c ? s / c : pos[i];
        });
        r.sort(function (a, b) { return bary[a] - bary[b] || a - b; });
        r.forEach(function (i, j) { pos[i] = j; });
      });
    }
    var W = 0, y = 0, xy = {};
    rows.forEach(function (r) { if (!r) return; var w = GAP_X * (r.length - 1); r.forEach(function (i) { w += size[items[i]][0]; }); W = Math.max(W, w); });
    rows.forEach(function (r) {
      if (!r) return;
      var w = GAP_X * (r.length - 1), h = 0;
      r.forEach(function (i) { w += size[items[i]][0]; h = Math.max(h, size[items[i]][1]); });
      var x = (W - w) / 2;
      r.forEach(function (i) { xy[items[i]] = [x, y]; x += size[items[i]][0] + GAP_X; });
      y += h + GAP_Y;
    });
    return {w: Math.max(W, 120), h: Math.max(y - GAP_Y, 20), items: items, xy: xy, size: size, sub: sub, links: links};
  }
  var svg, view, vb = null;
  function draw(focus) {
    var L = layout(D.top);
    while (view.firstChild) view.removeChild(view.firstChild);
    var where = {};
    drawGroup(D.top, L, 10, 10, where);
    if (focus && where[focus]) { var p = where[focus]; vb = [p[0] - 300, p[1] - 200, 900, 600]; }
    else vb = [0, 0, Math.max(L.w + 20, 400), Math.max(L.h + 20, 300)];  // fit what is open
    svg.setAttribute("viewBox", vb.join(" "));
  }
  function drawGroup(g, L, ox, oy, where) {
    L.links.forEach(function (l) {
      var a = L.items[l[0]], b = L.items[l[1]];
      var x1 = ox + L.xy[a][0] + L.size[a][0] / 2, y1 = oy + L.xy[a][1] + L.size[a][1];
      var x2 = ox + L.xy[b][0] + L.size[b][0] / 2, y2 = oy + L.xy[b][1];
      var dy = Math.max(16, (y2 - y1) / 2);
      var grp = sv("g", {"class": "array " + (l[3] ? "peak" : l[5])}, view);
      var t = sv("title", {}, grp); t.textContent = l[4] + "  " + bytes(l[2]) + (l[3] ? " (live at the peak)" : "");
      sv("path", {d: "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + dy) + " " + x2 + "," + (y2 - dy) + " " + x2 + "," + y2, "marker-end": "url(#arrowhead)"}, grp);
      svText((x1 + x2) / 2 + 4, (y1 + y2) / 2, String(l[4]).split("{")[0] + " " + bytes(l[2]), {"class": "label"}, grp);
    });
    L.items.forEach(function (it) {
      var x = ox + L.xy[it][0], y = oy + L.xy[it][1], s = L.size[it];
      if (it[0] === "g") {
        var c = +it.slice(1), gg = G[c];
        var node = sv("g", {"class": "group " + (open[c] ? "open" : "closed"), "data-group": c}, view);
        sv("rect", {x: x, y: y, width: s[0], height: s[1], rx: 6}, node);
        svText(x + 8, y + 15, (open[c] ? "− " : "+ ") + gg.title, {"class": "title"}, node);
        if (!open[c]) svText(x + 8, y + 31, gg.size + " kernels", {}, node);
        node.addEventListener("click", function (ev) { ev.stopPropagation(); if (ev.target.closest("g.kernel")) return; open[c] = !open[c]; draw(); });
        if (open[c]) drawGroup(c, L.sub[it], x + PADG, y + PADG + TITLE, where);
      } else {
        var k = +it.slice(1), n = sv("g", {"class": "kernel " + K[k].category.replace(/ /g, "-") + (k === selected ? " selected" : ""), "data-kernel": k}, view);
        sv("rect", {x: x, y: y, width: s[0], height: s[1], rx: 3}, n);
        kernelLines(k).forEach(function (line, i) { svText(x + 6, y + 14 + i * LINE, line, i ? {} : {"class": "name"}, n); });
        n.addEventListener("click", function (ev) { ev.stopPropagation(); select(k); });
        where["k" + k] = [x, y];
      }
    });
  }
  function select(k) {
    selected = k;
    var x = K[k], p = document.getElementById("panel");
    p.textContent = "";
    el("h2", {}, x.name, p);
    var t = el("table", {"class": "facts"}, null, p);
    [["kind", x.category + (x.fusion_kind ? " " + x.fusion_kind : "")], ["target", x.target],
     ["fused", x.fused], ["shape", x.shape], ["bytes", bytes(x.bytes)], ["bytes accessed", bytes(x.bytes_accessed)],
     ["flops", count(x.flops)], ["op_name", x.op_name], ["source", x.source], ["computation", x.computation]]
      .forEach(function (r) { if (r[1] === "" || r[1] === null) return; var tr = el("tr", {}, null, t); el("th", {}, r[0], tr); el("td", {}, r[1], tr); });
    el("pre", {"class": "hlo", id: "panel-hlo"}, x.hlo, p);
    draw("k" + k);
  }
  function findKernel(query) {
    var q = String(query).toLowerCase(), hit = -1;
    for (var k = 0; k < K.length && hit < 0; k++) if (K[k].name.toLowerCase() === q) hit = k;
    for (var k2 = 0; k2 < K.length && hit < 0; k2++) {
      var x = K[k2];
      if (x.name.toLowerCase().indexOf(q) >= 0 || x.op_name.toLowerCase().indexOf(q) >= 0 || x.source.toLowerCase().indexOf(q) >= 0) hit = k2;
    }
    var status = document.getElementById("search-status") || {};
    if (hit < 0) { status.textContent = "no kernel matches " + query; return -1; }
    status.textContent = "found " + K[hit].name;
    path[hit].forEach(function (g) { open[g] = true; });
    select(hit);
    return hit;
  }
  function graph() {
    var box = document.getElementById("graph");
    if (!K.length) { el("h2", {}, "Kernel graph", box); el("div", {"class": "info"}, "no kernels: this input has XLA's memory files but not the module", box); return; }
    el("h2", {}, "Kernel graph (" + K.length + " kernels; click a group to open it, a kernel to see its HLO)", box);
    var bar = el("div", {"class": "bar"}, null, box);
    var input = el("input", {id: "search", type: "search", placeholder: "search: name, op_name or file:line"}, null, bar);
    el("span", {id: "search-status"}, "", bar);
    input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") findKernel(input.value); });
    svg = sv("svg", {id: "graph-svg", width: "100%", height: "640"}, box);
    var defs = sv("defs", {}, svg);
    var m = sv("marker", {id: "arrowhead", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"}, defs);
    sv("path", {d: "M0,0 L10,5 L0,10 z", fill: "#666"}, m);
    view = sv("g", {id: "viewport"}, svg);
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var f = ev.deltaY > 0 ? 1.15 : 1 / 1.15, r = svg.getBoundingClientRect();
      var mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
      vb = [mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f];
      svg.setAttribute("viewBox", vb.join(" "));
    }, {passive: false});
    var drag = null;
    svg.addEventListener("mousedown", function (ev) { drag = [ev.clientX, ev.clientY, vb[0], vb[1]]; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      vb[0] = drag[2] - (ev.clientX - drag[0]) * vb[2] / r.width; vb[1] = drag[3] - (ev.clientY - drag[1]) * vb[3] / r.height;
      svg.setAttribute("viewBox", vb.join(" "));
    });
    draw();
  }
  summary(); timeline(); graph();
  window.hloscope = {open: function (g) { open[g] = true; draw(); }, find: findKernel, data: D};
  document.body.setAttribute("data-ready", "1");
})();
