// -- Memory: the timeline stacked by kind or by op_name scope with the peak marked; hover
// lists what is live, click pins a step; a value selected shows its producer, consumers,
// live range and source line; the values at the peak as a sortable table; per memory
// space where the report has them; XLA's figures and why they differ.
var COLORS = ["#7f9fc9", "#e0a458", "#9fc98a", "#c9a0dc", "#e5898b", "#8fd1cf", "#d4c47a", "#bbbbbb"];
var memSel = {way: "kind", value: null, step: null}, memDraw = null;

BUILD.memory = function (box) {
  el("h2", {}, "Memory over the schedule: peak " + bytes(M.peak) + (M.peak_instruction ? " at step " + M.peak_step + " (" + M.peak_instruction + ")" : ""), box);
  var row = el("div", {"class": "row"}, null, box);
  var left = el("div", {"class": "grow"}, null, row);
  var info = el("div", {id: "timeline-info", "class": "side info"}, "hover the timeline to see what is live; click to keep a step", row);
  if (M.timeline && M.timeline.length) {
    var bar = el("div", {"class": "bar"}, "stack by ", left);
    ["kind", "scope"].forEach(function (w) {
      if (!M.stacks || !M.stacks[w]) return;
      var b = el("button", {type: "button", id: "stack-" + w}, w === "kind" ? "kind" : "op_name scope", bar);
      b.addEventListener("click", function () { memSel.way = w; memDraw(); });
    });
    var tbox = el("div", {}, null, left);
    memDraw = function () { stackedTimeline(clear(tbox), info); };
    memDraw();
  } else {
    el("div", {"class": "info"}, "no timeline: the module is not in this input (XLA's memory files only)", left);
  }
  var row2 = el("div", {"class": "row"}, null, box);
  var pv = el("div", {"class": "grow"}, null, row2);
  el("h2", {}, "Live at the peak (" + M.peak_values.length + " values, largest first)", pv);
  sortTable(pv, {id: "peak-values", rows: M.peak_values, page: 30, key: function (v) { return v[0]; },
    cols: [["value", function (v) { return v[0]; }], ["shape", function (v) { return v[1]; }],
           ["bytes", function (v) { return v[2]; }, function (v) { return bytes(v[2]); }, "num"],
           ["kind", function (v) { return v[3]; }], ["op_name", function (v) { return v[5]; }],
           ["source", function (v) { return v[6]; }, null, "src"]],
    click: function (v) { selectValue(v[0]); }});
  el("div", {id: "value-panel", "class": "side"}, "select a value to see its producer, consumers, live range and source line", row2);
  spaces(box);
  figures(M.figures, box);
};
SHOW.memory = function (box, p) { if (p.v) selectValue(p.v); };

function stackedTimeline(box, info) {
  var tl = M.timeline, st = M.stacks[memSel.way], n = tl.length;
  var W = 980, H = 260, L = 70, B = 22, max = 0;
  tl.forEach(function (p) { if (p[2] > max) max = p[2]; });
  if (M.peak > max) max = M.peak;
  var svg = sv("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "timeline-svg", "class": "hover"}, box);
  function X(i) { return L + (W - L - 10) * i / Math.max(1, n); }
  function Y(v) { return 10 + (H - B - 10) * (1 - v / (max || 1)); }
  var base = tl.map(function () { return 0; });
  st.series.forEach(function (s, si) {
    if (!s.length) return;
    var top = [], bottom = [];
    for (var i = 0; i < n; i++) {
      var b0 = base[i], b1 = b0 + s[i];
      top.push(X(i) + "," + Y(b1), X(i + 1) + "," + Y(b1));
      bottom.push(X(i) + "," + Y(b0), X(i + 1) + "," + Y(b0));  // reversed below: right to left
      base[i] = b1;
    }
    var poly = sv("polygon", {points: top.concat(bottom.reverse()).join(" "), fill: COLORS[si % COLORS.length], "class": "band"}, svg);
    el("title", {}, st.names[si], poly);
  });
  var lg = el("div", {"class": "legend"}, null, box);
  st.names.forEach(function (name, si) {
    if (!st.series[si].length) return;
    var s = el("span", {}, null, lg);
    el("i", {style: "background:" + COLORS[si % COLORS.length]}, null, s);
    el("span", {}, (name || "(no scope)"), s);
  });
  svText(4, 14, bytes(max), {"class": "axis"}, svg);
  svText(4, H - B, "0", {"class": "axis"}, svg);
  svText(L, H - 6, "step 0", {"class": "axis"}, svg);
  svText(W - 90, H - 6, "step " + M.steps, {"class": "axis"}, svg);
  var pi = peakBucket();
  if (M.peak !== null) {
    sv("line", {x1: X(pi + 0.5), x2: X(pi + 0.5), y1: 10, y2: H - B, stroke: "#c0392b", "stroke-dasharray": "4,3"}, svg);
    svText(Math.min(X(pi + 0.5) + 4, W - 160), 22, "peak " + bytes(M.peak), {"class": "peak"}, svg);
  }
  var range = sv("rect", {x: 0, y: 10, width: 0, height: H - B - 10, "class": "range", visibility: "hidden"}, svg);
  var cursor = sv("line", {x1: 0, x2: 0, y1: 10, y2: H - B, stroke: "#444", visibility: "hidden"}, svg);
  function at(ev) {
    var r = svg.getBoundingClientRect(), x = (ev.clientX - r.left) * W / r.width;
    return Math.max(0, Math.min(n - 1, Math.floor((x - L) / (W - L - 10) * n)));
  }
  function put(i) {
    cursor.setAttribute("x1", X(i + 0.5)); cursor.setAttribute("x2", X(i + 0.5));
    cursor.setAttribute("visibility", "visible");
    showLive(info, tl[i]);
  }
  svg.addEventListener("mousemove", function (ev) { if (memSel.step === null) put(at(ev)); });
  svg.addEventListener("click", function (ev) { var i = at(ev); memSel.step = memSel.step === i ? null : i; put(i); });
  memSel.mark = function (v) {   // the live range of the selected value
    if (!v) { range.setAttribute("visibility", "hidden"); return; }
    var a = 0, b = n - 1;
    for (var i = 0; i < n; i++) { if (tl[i][1] < v[1]) a = i + 1; if (tl[i][0] <= v[2]) b = i; }
    range.setAttribute("x", X(a)); range.setAttribute("width", Math.max(2, X(b + 1) - X(a)));
    range.setAttribute("visibility", "visible");
  };
  if (memSel.value) memSel.mark(valueOf(memSel.value));
}

function showLive(info, p) {
  var step = p[0];
  clear(info);
  el("div", {}, "steps " + p[0] + "-" + p[1] + ": up to " + bytes(p[2]) + (p[3] ? " (" + p[3] + ")" : ""), info);
  var live = M.values.filter(function (v) { return v[1] <= step && step <= v[2]; });
  live.sort(function (a, b) { return b[3] - a[3]; });
  var t = el("table", {"class": "list"}, null, info);
  live.slice(0, 14).forEach(function (v) {
    var tr = el("tr", {"class": "clickable"}, null, t);
    [v[0], bytes(v[3]), v[5], v[6]].forEach(function (c, i) { el("td", {"class": i === 1 ? "num" : ""}, c, tr); });
    tr.addEventListener("click", function () { selectValue(v[0]); });
  });
  if (live.length > 14) el("div", {"class": "muted"}, "and " + (live.length - 14) + " more among the largest values", info);
}

function valueOf(label) {
  for (var i = 0; i < M.values.length; i++) if (M.values[i][0] === label) return M.values[i];
  return null;
}
function kernelNamed(name) {
  for (var k = 0; k < K.length; k++) if (K[k].name === name) return k;
  return -1;
}

function selectValue(label) {
  memSel.value = label;
  var p = document.getElementById("value-panel");
  if (!p) return;
  clear(p);
  var v = valueOf(label), pv = null;
  M.peak_values.forEach(function (x) { if (x[0] === label) pv = x; });
  el("h3", {}, label, p);
  var t = el("table", {"class": "facts"}, null, p);
  function row(a, b) { if (b === "" || b === null || b === undefined) return; var tr = el("tr", {}, null, t); el("th", {}, a, tr); el("td", {}, b, tr); }
  var inst = v ? v[4] : pv ? pv[4] : "";
  row("shape", v ? v[7] : pv && pv[1]);
  row("bytes", bytes(v ? v[3] : pv && pv[2]));
  row("kind", v ? v[5] : pv && pv[3]);
  row("live range", v ? "steps " + v[1] + "-" + v[2] + " of " + M.steps : "");
  row("live at the peak", pv ? "yes" : "no");
  row("op_name", v ? v[8] : pv && pv[5]);
  row("source", v ? v[6] : pv && pv[6]);
  var k = kernelNamed(inst);
  var pr = el("p", {}, "producer: ", p);
  if (k >= 0) link(inst, "kernels", {k: k}, pr); else el("span", {}, inst || "unknown", pr);
  if (k >= 0) {
    var cons = [];
    D.edges.forEach(function (e) { if (e[0] === k && cons.indexOf(e[1]) < 0) cons.push(e[1]); });
    var cp = el("p", {}, "consumers: " + (cons.length ? "" : "none among the kernels (an output, or read by a loop)"), p);
    cons.slice(0, 12).forEach(function (c, i) { if (i) el("span", {}, ", ", cp); link(K[c].name, "kernels", {k: c}, cp); });
    if (cons.length > 12) el("span", {}, " and " + (cons.length - 12) + " more", cp);
    link("show in the graph →", "graph", {k: k}, p);
  }
  if (memSel.mark) memSel.mark(v);
  Array.prototype.forEach.call(document.querySelectorAll("#peak-values tr[data-key]"), function (tr) {
    tr.classList.toggle("selected", tr.getAttribute("data-key") === label);
  });
}

function spaces(box) {
  var hw = D.hardware;
  if (!hw || !hw.memory_spaces || !hw.memory_spaces.length) return;
  el("h2", {}, "Per memory space (per device)", box);
  var t = el("table", {"class": "list", id: "memory-spaces"}, null, box), hr = el("tr", {}, null, t);
  ["space", "peak", "at step", "values"].forEach(function (h) { el("th", {}, h, hr); });
  hw.memory_spaces.forEach(function (s) {
    var tr = el("tr", {}, null, t);
    el("td", {}, s.name + " (" + s.space + ")", tr); el("td", {"class": "num"}, bytes(s.peak_bytes), tr);
    el("td", {"class": "num"}, s.step, tr); el("td", {"class": "num"}, s.values, tr);
  });
}

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
