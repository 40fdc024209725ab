// -- Overview: one screen, three answers (what got fused and what broke it; what is alive
// at the peak and which lines made it; which collectives and how much they move), each
// with links into its view; the notes and the advisor's first groups.
function byKey(list, key, val) {
  var m = {}, out = [];
  list.forEach(function (x) {
    var k = key(x);
    if (!m[k]) { m[k] = {key: k, n: 0, v: 0, items: []}; out.push(m[k]); }
    m[k].n++; m[k].v += val ? val(x) : 0; m[k].items.push(x);
  });
  return out;
}

BUILD.overview = function (box) {
  var notes = D.notes || [];
  if (notes.length) {
    var nb = el("section", {id: "notes", "class": "info"}, null, box);
    notes.slice(0, 3).forEach(function (n) { el("p", {}, n, nb); });
    if (notes.length > 3) {
      var b = el("button", {type: "button"}, "show " + (notes.length - 3) + " more notes", nb);
      b.addEventListener("click", function () { notes.slice(3).forEach(function (n) { el("p", {}, n, nb); }); b.remove(); });
    }
  }
  var grid = el("div", {"class": "answers"}, null, box);
  fusedCard(el("div", {"class": "card", id: "answer-kernels"}, null, grid));
  peakCard(el("div", {"class": "card", id: "answer-memory"}, null, grid));
  collectivesCard(el("div", {"class": "card", id: "answer-collectives"}, null, grid));
  var adv = el("div", {"class": "card wide", id: "answer-advisor"}, null, box);
  el("h2", {}, "Advisor: " + D.findings.length + " group" + (D.findings.length === 1 ? "" : "s") + " of findings", adv);
  if (!D.findings.length) el("p", {"class": "muted"}, "nothing to suggest" + (K.length ? "" : " (no module in this input)"), adv);
  D.findings.slice(0, 3).forEach(function (f, i) {
    var p = el("p", {"class": "line"}, null, adv);
    link(f.rule + " " + f.title + (f.count > 1 ? " (×" + f.count + ")" : ""), "advisor", {f: i}, p);
    el("span", {"class": "muted"}, "  saves " + f.saving, p);
  });
  if (D.findings.length > 3) link("all " + D.findings.length + " in the Advisor →", "advisor", null, adv);
};

function fusedCard(c) {
  var asWritten = D.optimized === false;  // a module before XLA's passes: nothing fused yet
  el("h2", {}, (asWritten ? "As written (not optimized by XLA): " : "What XLA made: ") +
     K.length + (asWritten ? " operation" : " kernel") + (K.length === 1 ? "" : "s"), c);
  if (!K.length) { el("p", {"class": "muted"}, "no module in this input: XLA's memory files only", c); return; }
  var cats = byKey(K, function (k) { return k.category + (k.fusion_kind ? " " + k.fusion_kind : ""); },
                   function (k) { return k.bytes_accessed; });
  cats.sort(function (a, b) { return b.n - a.n; });
  var t = el("table", {"class": "list"}, null, c);
  cats.slice(0, 6).forEach(function (g) {
    var tr = el("tr", {"class": "clickable"}, null, t);
    el("td", {}, g.key, tr); el("td", {"class": "num"}, g.n, tr); el("td", {"class": "num"}, bytes(g.v) + " moved", tr);
    tr.addEventListener("click", function () { go("kernels", {kind: g.key.split(" ")[0]}); });
  });
  var breaks = K.filter(function (k) { return k.category !== "fusion"; });
  var fusedOps = 0; K.forEach(function (k) { if (k.category === "fusion") fusedOps++; });
  if (asWritten)
    el("p", {}, "XLA has not fused these yet: each operation counts as a kernel here; the " +
       "optimized module (compiled.as_text(), or a dump's after_optimizations file) shows " +
       "what runs.", c);
  else
    el("p", {}, fusedOps + " fusions; fusion stops at " + breaks.length + " other kernels " +
       "(library calls, collectives, copies, loops: each reads and writes memory).", c);
  var tm = D.profile ? function (k) { return k.measured || 0; } : function (k) { return k.time; };
  el("h3", {}, D.profile ? "Longest kernels (measured, " + D.profile.runs + " runs; step " + seconds(D.profile.step) + ")"
                         : "Longest kernels (estimated: roofline on " + (D.roofline ? D.roofline.device : "?") + ")", c);
  var top = K.map(function (k, i) { return i; }).sort(function (a, b) { return tm(K[b]) - tm(K[a]) || a - b; }).slice(0, 5);
  var t2 = el("table", {"class": "list"}, null, c);
  top.forEach(function (i) {
    var tr = el("tr", {"class": "clickable"}, null, t2);
    el("td", {}, K[i].name, tr); el("td", {"class": "num"}, seconds(tm(K[i])), tr);
    if (D.profile && D.profile.step > 0)  // the measured share of the step, as the CLI shows it
      el("td", {"class": "num"}, (100 * tm(K[i]) / D.profile.step).toFixed(1) + "%", tr);
    el("td", {"class": "src"}, K[i].source, tr);
    tr.addEventListener("click", function () { go("kernels", {k: i}); });
  });
  link("all kernels →", "kernels", null, c); el("span", {}, "  ", c); link("the graph →", "graph", null, c);
}

function peakCard(c) {
  el("h2", {}, "Alive at the peak: " + bytes(M.peak), c);
  var at = M.peak_instruction ? "at step " + M.peak_step + " (" + M.peak_instruction + ")" : M.peak_step !== null ? "at step " + M.peak_step : "";
  var live = M.peak_count || M.peak_values.length;  // every value live, not the ones the page keeps
  el("p", {"class": "muted"}, at + (live ? "; " + live + " values live" : ""), c);
  if (M.timeline && M.timeline.length) miniTimeline(c);
  var lines = byKey(M.peak_values, function (v) { return v[6] || "(no source line)"; }, function (v) { return v[2]; });
  lines.sort(function (a, b) { return b.v - a.v; });
  el("h3", {}, "The lines that made it", c);
  var t = el("table", {"class": "list", id: "peak-lines"}, null, c);
  lines.slice(0, 6).forEach(function (g) {
    var tr = el("tr", {"class": "clickable"}, null, t);
    el("td", {"class": "src"}, g.key, tr); el("td", {"class": "num"}, bytes(g.v), tr);
    el("td", {"class": "num"}, g.n + " value" + (g.n === 1 ? "" : "s"), tr);
    tr.addEventListener("click", function () { go("memory", {v: g.items[0][0]}); });
  });
  var kinds = byKey(M.peak_values, function (v) { return v[3] || "value"; }, function (v) { return v[2]; });
  el("p", {"class": "muted"}, kinds.map(function (g) { return g.key + " " + bytes(g.v); }).join(" · "), c);
  link("the memory view →", "memory", null, c);
}

function miniTimeline(c) {
  var tl = M.timeline, W = 420, H = 60, max = 0;
  tl.forEach(function (p) { if (p[2] > max) max = p[2]; });
  var svg = sv("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "mini"}, c);
  var pts = ["0," + H];
  tl.forEach(function (p, i) { pts.push((W * i / tl.length) + "," + (H - 2 - (H - 6) * p[2] / (max || 1))); });
  pts.push(W + "," + H);
  sv("polygon", {points: pts.join(" "), fill: "#9cb8da", stroke: "#3b6ea8"}, svg);
  var pi = peakBucket();
  sv("line", {x1: W * (pi + 0.5) / tl.length, x2: W * (pi + 0.5) / tl.length, y1: 0, y2: H, stroke: "#c0392b", "stroke-dasharray": "3,2"}, svg);
}
function peakBucket() {
  var tl = M.timeline, pi = 0;
  for (var j = 0; j < tl.length; j++) if (tl[j][0] <= M.peak_step && M.peak_step <= tl[j][1]) pi = j;
  return pi;
}

function collectivesCard(c) {
  var cs = S.collectives || [];
  el("h2", {}, "Collectives: " + cs.length, c);
  if (!cs.length) { el("p", {"class": "muted"}, S.num_partitions > 1 ? "none in this module" : "none: a single-device module", c); return; }
  var kinds = byKey(cs, function (x) { return x[1]; }, function (x) { return x[3]; });
  kinds.sort(function (a, b) { return b.v - a.v; });
  var t = el("table", {"class": "list"}, null, c), total = 0;
  kinds.forEach(function (g) {
    total += g.v;
    var tr = el("tr", {"class": "clickable"}, null, t);
    el("td", {}, g.key, tr); el("td", {"class": "num"}, "×" + g.n, tr); el("td", {"class": "num"}, bytes(g.v) + " per device", tr);
    tr.addEventListener("click", function () { go("collectives", {kind: g.key}); });
  });
  el("p", {}, "In all " + bytes(total) + " sent per device" + (S.num_partitions > 1 ? ", over " + S.num_partitions + " devices" : "") + ".", c);
  var hw = D.hardware;
  if (hw && hw.async_collectives && hw.async_collectives.length) {
    var exposed = hw.async_collectives.filter(function (a) { return a.exposed; }).length;
    el("p", {"class": "muted"}, hw.async_collectives.length + " asynchronous, " + exposed + " with nothing to overlap", c);
  }
  link("the collectives view →", "collectives", null, c);
}
