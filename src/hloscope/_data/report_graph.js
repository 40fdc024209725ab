// -- Graph: the kernels as a layered graph of groups (loops, branches, calls; op_name
// scopes; chunks in schedule order where a scope holds too many).  Opens at 100% (labels
// at their CSS size) on the group holding the peak; groups expand and collapse in place;
// arrows as thick as the bytes they carry (red: live at the peak); a minimap; search.
var open = {}, gDepth = [], gPath = [], gSvg = null, gView = null, gMini = null, gMiniRect = null;
var gPeak = -1, gSel = -1, vb = null, gBounds = [0, 0, 400, 300], gWhere = {}, maxEdge = 1, hits = [], hitAt = 0;
var gMaxMeasured = K.reduce(function (m, k) { return Math.max(m, k.measured || 0); }, 1e-30);  // the heat scale (a profile)
(function () {
  for (var g = 0; g < G.length; g++) { var d = 0, p = G[g].parent; while (p >= 0) { d++; p = G[p].parent; } gDepth[g] = d; }
  for (var k = 0; k < K.length; k++) {
    var chain = [], g2 = K[k].group; while (g2 >= 0) { chain.unshift(g2); g2 = G[g2].parent; }
    gPath[k] = chain;
  }
  (D.edges || []).forEach(function (e) { if (e[3] > maxEdge) maxEdge = e[3]; });
})();
function itemOf(g, k) {
  var chain = gPath[k], d = gDepth[g];
  if (chain[d] !== g) return null;
  if (chain.length === d + 1) return "k" + k;
  return "g" + chain[d + 1];
}
function peakKernel() {
  var k = kernelNamed(M.peak_instruction || "");
  if (k >= 0) return k;
  for (var i = 0; i < M.peak_values.length && k < 0; i++) k = kernelNamed(M.peak_values[i][4]);
  return k;
}
function defaultOpen() {
  open = {}; open[D.top] = true;
  var g = D.top;   // open single children down the tree
  while (G[g] && G[g].groups.length === 1 && !G[g].kernels.length) { g = G[g].groups[0]; open[g] = true; }
  var pk = peakKernel();
  if (pk >= 0) gPath[pk].forEach(function (x) { open[x] = true; });
  return pk;
}
var opsMemo = {};
function groupOps(g) {   // the most common ops under a group, for its closed box
  if (opsMemo[g] !== undefined) return opsMemo[g];
  var c = {}, stack = [g], n = 0;
  while (stack.length && n < 4000) {
    var x = G[stack.pop()];
    x.kernels.forEach(function (k) { var o = K[k].op_name.split("/").pop() || K[k].category; c[o] = (c[o] || 0) + 1; n++; });
    x.groups.forEach(function (y) { stack.push(y); });
  }
  var top = Object.keys(c).sort(function (a, b) { return c[b] - c[a] || (a < b ? -1 : 1); }).slice(0, 3);
  return (opsMemo[g] = top.map(function (o) { return o + (c[o] > 1 ? " ×" + c[o] : ""); }).join(", "));
}
var BOX_W = 230, LINE = 14, GAP_X = 26, GAP_Y = 40, PADG = 12, TITLE = 22;
function kernelLines(k) {
  var x = K[k], lines = [x.name, x.category + (x.fusion_kind ? " " + x.fusion_kind : "")];
  if (x.target) lines.push(x.target);
  if (x.fused) lines.push(x.fused.length > 32 ? x.fused.slice(0, 31) + "…" : x.fused);
  lines.push(x.shape.split("{")[0].slice(0, 24) + "  " + bytes(x.bytes));
  return lines;
}
function layout(g) {
  var items = G[g].groups.map(function (c) { return "g" + c; }).concat(G[g].kernels.map(function (k) { return "k" + k; }));
  var idx = {}, size = {}, sub = {};
  items.forEach(function (it, i) {
    idx[it] = i;
    if (it[0] === "g") {
      var c = +it.slice(1);
      if (open[c]) { sub[it] = layout(c); size[it] = [sub[it].w + 2 * PADG, sub[it].h + 2 * PADG + TITLE]; }
      else size[it] = [BOX_W, 3 * LINE + 14];
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
  G[g].groups.forEach(function (c) {
    (G[c].inputs || []).forEach(function (k) {
      var a = itemOf(g, k), b = "g" + c;
      if (a === null || a === b || seen[a + ">" + b]) return;
      var l = [idx[a], idx[b], K[k].bytes, 0, K[k].shape, "temporary"]; seen[a + ">" + b] = l; links.push(l);
      succ[idx[a]].push(idx[b]); indeg[idx[b]]++;
    });
  });
  var layer = items.map(function () { return 0; }), queue = [], done = items.map(function () { return false; });
  items.forEach(function (_, i) { if (!indeg[i]) queue.push(i); });
  for (var qi = 0; qi < queue.length; qi++) {
    var u = queue[qi]; done[u] = true;
    succ[u].forEach(function (v) { layer[v] = Math.max(layer[v], layer[u] + 1); if (--indeg[v] === 0) queue.push(v); });
  }
  var rows = [];
  items.forEach(function (_, i) { (rows[layer[i]] = rows[layer[i]] || []).push(i); });
  var pos = items.map(function (_, i) { return i; }), into = items.map(function () { return []; });
  links.forEach(function (l) { into[l[1]].push(l[0]); });
  for (var sweep = 0; sweep < 2; sweep++) {
    rows.forEach(function (r, li) {
      if (!li || !r) return;
      var bary = {};
      r.forEach(function (i) {
        var s = 0; into[i].forEach(function (a) { s += pos[a]; });
        bary[i] = into[i].length ? s / into[i].length : pos[i];
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
function setView(v) {
  vb = v;
  gSvg.setAttribute("viewBox", vb.join(" "));
  if (gMiniRect) { gMiniRect.setAttribute("x", vb[0]); gMiniRect.setAttribute("y", vb[1]); gMiniRect.setAttribute("width", vb[2]); gMiniRect.setAttribute("height", vb[3]); }
}
function screen() { var r = gSvg.getBoundingClientRect(); return [Math.max(300, r.width || 900), Math.max(200, r.height || 600)]; }
function draw(focus) {
  var L = layout(D.top);
  clear(gView);
  gWhere = {};
  drawGroup(D.top, L, 10, 10);
  gBounds = [0, 0, L.w + 20, L.h + 20];
  gMini.setAttribute("viewBox", gBounds.join(" "));
  var s = screen(), W = L.w + 20, H = L.h + 20, p = focus && gWhere[focus];
  if (p || !vb) {   // 100%: what fits is centred; a focus that does not is centred on
    var x = W <= s[0] || !p ? (W - s[0]) / 2 : p[0] + BOX_W / 2 - s[0] / 2;
    var y = H <= s[1] ? (H - s[1]) / 2 : p ? p[1] - s[1] / 3 : 0;
    setView([x, y, s[0], s[1]]);
  } else setView(vb);
}
function drawGroup(g, L, ox, oy) {
  L.links.forEach(function (l) {
    var a = L.items[l[0]], b = L.items[l[1]];
    var x1 = ox + L.xy[a][0] + L.size[a][0] / 2, y1 = oy + L.xy[a][1] + L.size[a][1];
    var x2 = ox + L.xy[b][0] + L.size[b][0] / 2, y2 = oy + L.xy[b][1];
    var dy = Math.max(16, (y2 - y1) / 2);
    var grp = sv("g", {"class": "array " + (l[3] ? "peak" : l[5])}, gView);
    var t = sv("title", {}, grp); t.textContent = l[4] + "  " + bytes(l[2]) + (l[3] ? " (live at the peak)" : "");
    var w = 1 + 5 * Math.log(1 + l[2]) / Math.log(1 + maxEdge);
    sv("path", {d: "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + dy) + " " + x2 + "," + (y2 - dy) + " " + x2 + "," + y2, "marker-end": "url(#arrowhead)", "stroke-width": w.toFixed(2)}, grp);
    svText((x1 + x2) / 2 + 5, (y1 + y2) / 2, String(l[4]).split("{")[0] + " " + bytes(l[2]), {"class": "label"}, grp);
  });
  L.items.forEach(function (it) {
    var x = ox + L.xy[it][0], y = oy + L.xy[it][1], s = L.size[it];
    if (it[0] === "g") {
      var c = +it.slice(1), gg = G[c];
      var node = sv("g", {"class": "group " + (open[c] ? "open" : "closed"), "data-group": c}, gView);
      sv("rect", {x: x, y: y, width: s[0], height: s[1], rx: 6}, node);
      var title = gg.title.length > 30 && !open[c] ? gg.title.slice(0, 29) + "…" : gg.title;
      svText(x + 8, y + 16, (open[c] ? "− " : "+ ") + title, {"class": "title"}, node);
      if (!open[c]) {
        svText(x + 8, y + 32, gg.size + " kernel" + (gg.size === 1 ? "" : "s"), {}, node);
        var ops = groupOps(c);
        svText(x + 8, y + 47, ops.length > 32 ? ops.slice(0, 31) + "…" : ops, {"class": "ops"}, node);
      }
      node.addEventListener("click", function (ev) { ev.stopPropagation(); if (ev.target.closest("g.kernel")) return; open[c] = !open[c]; draw(); });
      gWhere["g" + c] = [x, y];
      if (open[c]) drawGroup(c, L.sub[it], x + PADG, y + PADG + TITLE);
    } else {
      var k = +it.slice(1), n = sv("g", {"class": "kernel " + K[k].category.replace(/ /g, "-") + (k === gSel ? " selected" : "") + (hits.indexOf(k) >= 0 ? " hit" : "") + (k === gPeak ? " peak" : ""), "data-kernel": k}, gView);
      var heat = D.profile && K[k].measured ? {style: "fill: hsl(8, 85%, " + Math.round(95 - 45 * K[k].measured / gMaxMeasured) + "%)"} : {};
      sv("rect", Object.assign({x: x, y: y, width: s[0], height: s[1], rx: 3}, heat), n);
      kernelLines(k).forEach(function (line, i) { svText(x + 6, y + 14 + i * LINE, line, i ? {} : {"class": "name"}, n); });
      n.addEventListener("click", function (ev) { ev.stopPropagation(); graphSelect(k); });
      gWhere["k" + k] = [x, y];
    }
  });
}
function graphSelect(k, fromRoute) {
  gSel = k;
  gPath[k].forEach(function (g) { open[g] = true; });
  kernelFacts(k, document.getElementById("panel"), false);
  draw("k" + k);
  if (!fromRoute) try { history.replaceState(null, "", hashOf("graph", {k: k})); } catch (e) { /* srcdoc */ }
}
function graphOpen(g) { if (!gSvg) go("graph"); open[g] = true; draw(); }
function graphLabelPx() {
  var t = document.querySelector("#graph-svg g.kernel text.name, #graph-svg g.group text.title");
  if (!t || !gSvg) return 0;
  return parseFloat(getComputedStyle(t).fontSize) * gSvg.getScreenCTM().a;
}
function findKernel(query) {
  var q = String(query).trim().toLowerCase(), status = document.getElementById("search-status");
  hits = [];
  if (q) {
    for (var k = 0; k < K.length; k++) if (K[k].name.toLowerCase() === q) hits.push(k);
    for (var k2 = 0; k2 < K.length; k2++) {
      var x = K[k2];
      if (hits.indexOf(k2) < 0 && (x.name.toLowerCase().indexOf(q) >= 0 || x.op_name.toLowerCase().indexOf(q) >= 0 || x.source.toLowerCase().indexOf(q) >= 0)) hits.push(k2);
    }
  }
  if (!hits.length) { if (status) status.textContent = "no kernel matches " + query; if (gSvg) draw(); return -1; }
  hitAt = 0;
  if (status) status.textContent = "found " + K[hits[0]].name + (hits.length > 1 ? " (1 of " + hits.length + "; Enter again for the next)" : "");
  if (gSvg) graphSelect(hits[0]);
  return hits[0];
}
BUILD.graph = function (box) {
  if (!K.length) { el("h2", {}, "Kernel graph", box); el("div", {"class": "info"}, "no kernels: this input has XLA's memory files but not the module", box); return; }
  var row = el("div", {"class": "row graphrow"}, null, box), left = el("div", {"class": "grow", id: "graph"}, null, row);
  var bar = el("div", {"class": "bar"}, null, left);
  var input = el("input", {id: "search", type: "search", placeholder: "search: name, op_name or file:line"}, null, bar);
  var last = "";
  input.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter") return;
    if (input.value === last && hits.length > 1) {
      hitAt = (hitAt + 1) % hits.length;
      document.getElementById("search-status").textContent = "found " + K[hits[hitAt]].name + " (" + (hitAt + 1) + " of " + hits.length + ")";
      graphSelect(hits[hitAt]);
    } else { last = input.value; findKernel(input.value); }
  });
  [["open-visible", "open the groups shown"], ["collapse", "collapse all"], ["fit", "fit"], ["zoom100", "100%"]].forEach(function (b) {
    var btn = el("button", {type: "button", id: b[0]}, b[1], bar);
    btn.addEventListener("click", function () {
      if (b[0] === "open-visible") {
        var closed = Array.prototype.map.call(document.querySelectorAll("#graph-svg g.group.closed"), function (n) { return +n.getAttribute("data-group"); });
        var more = 0; closed.forEach(function (c) { more += G[c].kernels.length + G[c].groups.length; });
        if (more > 600) { document.getElementById("search-status").textContent = "that would draw " + more + " more boxes: open groups one by one"; return; }
        closed.forEach(function (c) { open[c] = true; }); draw();
      } else if (b[0] === "collapse") { open = {}; open[D.top] = true; vb = null; draw(); }
      else if (b[0] === "fit") { var s = screen(), f = Math.max(gBounds[2] / s[0], gBounds[3] / s[1], 1); setView([0, 0, s[0] * f, s[1] * f]); }
      else { var s2 = screen(); setView([vb[0] + vb[2] / 2 - s2[0] / 2, vb[1] + vb[3] / 2 - s2[1] / 2, s2[0], s2[1]]); }
    });
  });
  el("span", {id: "search-status", "class": "muted"}, "", bar);
  var wrap = el("div", {"class": "graphwrap"}, null, left);
  gSvg = sv("svg", {id: "graph-svg"}, wrap);
  var defs = sv("defs", {}, gSvg);
  var m = sv("marker", {id: "arrowhead", viewBox: "0 0 10 10", refX: 10, refY: 5, markerUnits: "userSpaceOnUse", markerWidth: 9, markerHeight: 9, orient: "auto-start-reverse"}, defs);
  sv("path", {d: "M0,0 L10,5 L0,10 z", fill: "#666"}, m);
  gView = sv("g", {id: "viewport"}, gSvg);
  gMini = sv("svg", {id: "minimap", "class": "hover", preserveAspectRatio: "xMidYMin meet"}, wrap);
  sv("use", {href: "#viewport"}, gMini);
  gMiniRect = sv("rect", {"class": "seen"}, gMini);
  function miniMove(ev) {
    var pt = gMini.createSVGPoint(); pt.x = ev.clientX; pt.y = ev.clientY;
    var p = pt.matrixTransform(gMini.getScreenCTM().inverse());
    setView([p.x - vb[2] / 2, p.y - vb[3] / 2, vb[2], vb[3]]);
  }
  var miniDrag = false;
  gMini.addEventListener("mousedown", function (ev) { ev.stopPropagation(); miniDrag = true; miniMove(ev); });
  gMini.addEventListener("mousemove", function (ev) { if (miniDrag) miniMove(ev); });
  window.addEventListener("mouseup", function () { miniDrag = false; });
  el("aside", {id: "panel", "class": "side"}, "Select a kernel to see its HLO, sizes and source line. Click a group to open or close it; wheel to zoom, drag to move.", row);
  gSvg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var f = ev.deltaY > 0 ? 1.15 : 1 / 1.15, r = gSvg.getBoundingClientRect();
    var mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
    setView([mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f]);
  }, {passive: false});
  var drag = null;
  gSvg.addEventListener("mousedown", function (ev) { drag = [ev.clientX, ev.clientY, vb[0], vb[1]]; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var r = gSvg.getBoundingClientRect();
    setView([drag[2] - (ev.clientX - drag[0]) * vb[2] / r.width, drag[3] - (ev.clientY - drag[1]) * vb[3] / r.height, vb[2], vb[3]]);
  });
  var pk = gPeak = defaultOpen();
  if (pk >= 0) {
    var panel = document.getElementById("panel"), pp = el("p", {}, "The memory peak, " + bytes(M.peak) + " at step " + M.peak_step + ", is at ", null);
    panel.insertBefore(pp, panel.firstChild);
    var a = el("a", {href: hashOf("graph", {k: pk})}, K[pk].name, pp);
    el("span", {}, " (dashed red): its group is open.", pp);
  }
  draw(pk >= 0 ? "k" + pk : null);
};
SHOW.graph = function (box, p) {
  if (!K.length) return;
  if (p.k !== undefined && K[+p.k] && +p.k !== gSel) graphSelect(+p.k, true);
  else if (p.q) { document.getElementById("search").value = p.q; findKernel(p.q); }
};
