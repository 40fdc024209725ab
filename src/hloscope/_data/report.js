// hloscope report page, the core: reads the JSON in #hloscope-data, draws the fixed header
// and the navigation, and shows one view at a time (hash routing: #/kernels?k=12 keeps the
// place across reloads, back and forward).  The views are in report_*.js, concatenated
// after this file inside one function by _html.py; each is built on its first visit.
// Every text from the module goes through textContent (never innerHTML).  No network.
"use strict";
var D = JSON.parse(document.getElementById("hloscope-data").textContent);
var NS = "http://www.w3.org/2000/svg";
var K = D.kernels || [], G = D.groups || [], S = D.summary || {}, M = D.memory || {};
var VIEWS = [["overview", "Overview"], ["memory", "Memory"], ["kernels", "Kernels"],
             ["graph", "Graph"], ["collectives", "Collectives"], ["advisor", "Advisor"],
             ["source", "Source/IR"]];
var BUILD = {}, SHOW = {};   // per view: build(box) once; show(box, params) on each visit
var built = {}, current = null, scrollOf = {};

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
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
function bytes(n) {
  if (n === null || n === undefined) return "unknown";
  var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, x = n;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return i === 0 ? n + " B" : x.toFixed(2) + " " + u[i];
}
function count(n) {
  if (n === null || n === undefined) return "";
  if (n < 10000) return String(n);
  var s = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (var i = 0; i < s.length; i++) if (n >= s[i][0]) return (n / s[i][0]).toFixed(2) + " " + s[i][1];
  return String(n);
}
function exact(n) {
  if (n === null || n === undefined) return "unknown";
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",") + " B";
}
function seconds(t) {
  if (!t) return "0";
  if (t >= 1) return t.toFixed(2) + " s";
  if (t >= 1e-3) return (t * 1e3).toFixed(2) + " ms";
  if (t >= 1e-6) return (t * 1e6).toFixed(2) + " µs";
  return (t * 1e9).toFixed(1) + " ns";
}
function link(text, view, params, parent, cls) {
  var a = el("a", {href: hashOf(view, params), "class": cls || ""}, text, parent);
  return a;
}
function hashOf(view, params) {
  var q = [];
  for (var k in params || {}) q.push(k + "=" + encodeURIComponent(params[k]));
  return "#/" + view + (q.length ? "?" + q.join("&") : "");
}
// Links go through go(): a page in a notebook's iframe (srcdoc) resolves "#..." against
// the notebook's address, so the page sets its own hash, or routes without one.
var wanted = null;
function go(view, params) { navTo(hashOf(view, params)); }
function navTo(h) {
  if (location.hash === h) { wanted = h; route(); return; }
  wanted = h;
  try { location.hash = h; } catch (e) { /* no hash here: route below */ }
  if (location.hash !== h) route();   // otherwise hashchange routes
}

// -- a source path keeps its end, the file and line ("…/gen_transformer.py:12"); the whole
// path is its tooltip --
var SRC_CHARS = 40;   // in a table of a view; 24 in the overview's narrow cards
function keepEnd(e, chars) {
  var t = e.textContent, n = chars || SRC_CHARS;
  if (t.length <= n || e.hasAttribute("data-whole")) return;
  e.setAttribute("data-whole", t);
  e.setAttribute("title", t);
  e.textContent = "…" + t.slice(t.length - n + 1);
}
function keepEnds(root) {
  var cells = root.querySelectorAll("td.src");
  for (var i = 0; i < cells.length; i++) keepEnd(cells[i], cells[i].closest(".card") ? 24 : SRC_CHARS);
}

// -- a sortable table: columns [title, value(row), text(row), class]; rows shown in pages --
function sortTable(box, opts) {
  var cols = opts.cols, rows = opts.rows, shown = opts.page || 200, sortBy = opts.sort || null, desc = true;
  var t = el("table", {"class": "list", id: opts.id || ""}, null, box);
  var head = el("thead", {}, null, t), hr = el("tr", {}, null, head), body = el("tbody", {}, null, t);
  var foot = el("tfoot", {}, null, t);
  var more = el("button", {"class": "more", type: "button"}, "", box);
  cols.forEach(function (c, i) {
    var th = el("th", {"class": "sortable" + (c[3] ? " " + c[3] : ""), title: "sort by " + c[0]}, c[0], hr);
    th.addEventListener("click", function () { desc = sortBy === i ? !desc : true; sortBy = i; render(); });
  });
  function render() {
    var list = opts.filter ? rows.filter(opts.filter) : rows.slice();
    if (sortBy !== null) {
      var f = cols[sortBy][1];
      list.sort(function (a, b) {
        var x = f(a), y = f(b);
        var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -c : c;
      });
    }
    Array.prototype.forEach.call(hr.children, function (th, i) {
      th.setAttribute("data-order", sortBy === i ? (desc ? "desc" : "asc") : "");
    });
    clear(body);
    list.slice(0, shown).forEach(function (r) {
      var tr = el("tr", {"class": opts.click ? "clickable" : ""}, null, body);
      if (opts.key) tr.setAttribute("data-key", opts.key(r));
      cols.forEach(function (c) {
        var td = el("td", {"class": c[3] || ""}, c[2] ? c[2](r) : c[1](r), tr);
        if (c[3] === "src") keepEnd(td);
      });
      if (opts.click) tr.addEventListener("click", function () { opts.click(r, tr); });
    });
    clear(foot);
    if (opts.totals) {
      var tr = el("tr", {}, null, foot);
      opts.totals(list).forEach(function (v, i) { el("td", {"class": cols[i][3] || ""}, v, tr); });
    }
    more.textContent = "show " + Math.min(list.length - shown, 500) + " more of " + list.length;
    more.style.display = list.length > shown ? "" : "none";
    if (opts.after) opts.after(list);
  }
  more.addEventListener("click", function () { shown += 500; render(); });
  render();
  return {render: render, table: t};
}

// -- the header: what, where, how big; and the navigation ---------------------------------
function header() {
  var box = document.getElementById("summary"), fit = D.fit, tgt = D.target;
  var top = el("div", {"class": "top"}, null, box);
  el("h1", {}, D.module, top);
  keepEnd(el("span", {"class": "file"}, D.file, top), 80);
  var facts = [];
  var dev = tgt ? (tgt.name || tgt.chip) + (S.num_partitions > 1 ? ", " + S.num_partitions + " devices" : "")
    : (D.inspect && D.inspect.device && D.inspect.device.kind) ? D.inspect.device.kind
    : S.num_partitions > 1 ? S.num_partitions + " devices" + (S.partitioned ? " (sizes per device)" : "") : "1 device";
  facts.push(["device", dev]);
  var head = ((M.figures && M.figures.figures) || []).filter(function (f) { return f.key === "allocation"; })[0];
  if (head) {
    var needs = bytes(head.bytes);
    if (fit) needs += " of " + bytes(fit.limit_bytes || fit.hbm_bytes) + " (" + (fit.fits ? "fits" : "does not fit") + ")";
    facts.push(["needs (what XLA allocates)", needs]);
  }
  facts.push([head ? "at most live at once" : "peak", bytes(M.peak)]);
  facts.push([D.optimized === false ? "kernels (if run as written: not optimized)" : "kernels", S.kernels]);
  facts.push(["collectives", (S.collectives || []).length]);
  facts.push(["flops", count(S.flops)]);
  var tm = D.inspect && D.inspect.timings;
  if (tm && tm.compile !== undefined) facts.push(["compile", seconds(tm.compile)]);
  if (D.xla) facts.push(["XLA's dump files", (D.xla.allocations || 0) + " allocations" + (D.xla.total !== null ? ", " + bytes(D.xla.total) : "")]);
  var t = el("table", {"class": "facts"}, null, box), tr = el("tr", {}, null, t);
  facts.forEach(function (f) { el("th", {}, f[0], tr); el("td", {}, f[1], tr); });
  var nav = el("nav", {}, null, box);
  VIEWS.forEach(function (v) { el("a", {href: "#/" + v[0], id: "nav-" + v[0]}, v[1], nav); });
}

// -- words explained: a tooltip (title) on headings and cells that name a term of
// docs/glossary.md, set after each view is drawn --
var TERMS = [
  [/^kLoop\b/, "kLoop fusion: element-wise work (with broadcasts, slices, reshapes) in one kernel"],
  [/^kInput\b/, "kInput fusion: a reduction (or scatter) fused with the element-wise work that feeds it"],
  [/^kOutput\b/, "kOutput fusion: a dot or convolution fused with the element-wise work that consumes it"],
  [/^kCustom\b/, "kCustom fusion: compiled the backend's own way (a Triton matmul, a hand-written GPU kernel, cuDNN)"],
  [/^(ynn|xnn)_fusion/, "ynn_fusion: work XLA's CPU backend hands to YNNPACK (the successor of XNNPACK); one kernel"],
  [/^wrapped_/, "wrapped_OP: a single operation XLA put in a fusion of its own, so it runs as a kernel"],
  [/intensity/i, "intensity: flops per byte of memory accessed; low (a few flop/byte) means memory-bound"],
  [/roofline/i, "roofline: estimated time, the longer of flops / peak compute and bytes / memory bandwidth of the named device; a lower bound"],
  [/^bound$/, "bound: which limit the roofline estimate hits, memory bandwidth or compute"],
  [/live range/i, "live range: the steps from the instruction that defines a value to its last use; the value holds memory during it"],
  [/^(Alive at the peak|peak)\b/i, "peak: the step at which the most bytes are live, as XLA's HloLiveRange counts them"],
  [/^temporar/i, "temporary: memory for values that live only inside the program (XLA's temp allocation)"],
  [/^footprint/i, "footprint: arguments + outputs + temp - aliased: what one device holds for the program"],
  [/alias/i, "aliasing: an output that reuses an input's memory (a donated argument, input_output_alias)"],
  [/-(start|done)$/, "async pair: a collective or copy split into start and done; kernels between them overlap the transfer"],
  [/^collectives?\b/i, "collective: a kernel that moves data between devices (all-gather, all-reduce, reduce-scatter, ...)"],
  [/^flops$/, "flops: estimated floating-point operations"],
  [/^custom-call|^library call/i, "library call (custom-call): a kernel XLA calls rather than generates: cuBLAS, cuDNN, cuFFT, ducc_fft, a user's own"]];
function explain(root) {
  var cells = root.querySelectorAll("th, td, h2, h3, h4, .term");
  for (var i = 0; i < cells.length; i++) {
    var c = cells[i];
    if (c.classList.contains("explained")) continue;
    if (c.hasAttribute("title") && c.getAttribute("title").indexOf("sort by") !== 0) continue;
    var text = (c.textContent || "").trim();
    if (!text || text.length > 80) continue;
    for (var j = 0; j < TERMS.length; j++) {
      if (TERMS[j][0].test(text)) {
        var was = c.getAttribute("title");
        c.setAttribute("title", TERMS[j][1] + (was ? " (" + was + ")" : ""));
        c.classList.add("explained");
        break;
      }
    }
  }
}

function route() {
  var h = (wanted !== null ? wanted : location.hash).replace(/^#\/?/, ""), q = h.split("?"), name = q[0] || "overview", params = {};
  if (!BUILD[name]) name = "overview";
  (q[1] || "").split("&").forEach(function (p) {
    var i = p.indexOf("=");
    if (i > 0) params[p.slice(0, i)] = decodeURIComponent(p.slice(i + 1));
  });
  var main = document.getElementById("main");
  if (current) scrollOf[current] = document.getElementById("view-" + current).scrollTop;
  VIEWS.forEach(function (v) {
    var box = document.getElementById("view-" + v[0]);
    box.style.display = v[0] === name ? "" : "none";
    document.getElementById("nav-" + v[0]).className = v[0] === name ? "here" : "";
  });
  var box = document.getElementById("view-" + name);
  if (!built[name]) { built[name] = true; BUILD[name](box); }
  current = name;
  if (scrollOf[name]) box.scrollTop = scrollOf[name];
  if (SHOW[name]) SHOW[name](box, params);
  keepEnds(box);
  explain(box);
  main.setAttribute("data-view", name);
}

function start() {
  header();
  var main = document.getElementById("main");
  VIEWS.forEach(function (v) { el("section", {id: "view-" + v[0], "class": "view", style: "display:none"}, null, main); });
  window.addEventListener("hashchange", function () { wanted = null; route(); });
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a[href^='#']");
    if (!a) return;
    ev.preventDefault();
    navTo(a.getAttribute("href"));
  });
  explain(document.getElementById("summary"));
  route();
  window.hloscope = {data: D, go: go,
    open: function (g) { graphOpen(g); }, find: function (q) { return findKernel(q); },
    labelPx: function () { return graphLabelPx(); }};
  document.body.setAttribute("data-ready", "1");
}
