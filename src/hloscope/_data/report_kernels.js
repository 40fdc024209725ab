// -- Kernels: a sortable, filterable table of every kernel with totals; a row opens the
// kernel's facts and HLO beside the table and links to it in the graph.
var kTable = null, kFilter = {text: "", kind: ""}, kIndex = K.map(function (_, i) { return i; });

function kernelText(k) {
  var x = K[k];
  return (x.name + " " + x.category + " " + x.fusion_kind + " " + x.fused + " " + x.op_name + " " + x.source + " " + x.target).toLowerCase();
}

BUILD.kernels = function (box) {
  if (!K.length) { el("h2", {}, "Kernels", box); el("div", {"class": "info"}, "no kernels: this input has XLA's memory files but not the module", box); return; }
  var row = el("div", {"class": "row"}, null, box), left = el("div", {"class": "grow"}, null, row);
  var bar = el("div", {"class": "bar"}, null, left);
  var input = el("input", {id: "kernel-filter", type: "search", placeholder: "filter: name, kind, fused op, op_name or file:line"}, null, bar);
  var kinds = {}; K.forEach(function (k) { kinds[k.category] = (kinds[k.category] || 0) + 1; });
  var sel = el("select", {id: "kernel-kind"}, null, bar);
  el("option", {value: ""}, "every kind", sel);
  Object.keys(kinds).sort().forEach(function (c) { el("option", {value: c}, c + " (" + kinds[c] + ")", sel); });
  var shown = el("span", {id: "kernel-count", "class": "muted"}, "", bar);
  if (D.profile) el("div", {"class": "muted"}, "measured: median time per run over " + D.profile.runs + " profiled runs (" + D.profile.source + "), step " + seconds(D.profile.step), left);
  el("div", {"class": "muted"}, (D.profile ? "estimated" : "time") + ": a roofline estimate on " + (D.roofline ? D.roofline.device : "?") +
     " (the larger of flops over the peak rate and bytes over the bandwidth); intensity: flops per byte moved", left);
  var sum = function (list, f) { var s = 0; list.forEach(function (k) { s += f(K[k]); }); return s; };
  kTable = sortTable(left, {id: "kernel-table", rows: kIndex, page: 200, sort: null, key: function (k) { return k; },
    filter: function (k) {
      return (!kFilter.kind || K[k].category === kFilter.kind) && (!kFilter.text || kernelText(k).indexOf(kFilter.text) >= 0);
    },
    cols: [["#", function (k) { return k; }, null, "num"],
           ["kernel", function (k) { return K[k].name; }],
           ["kind", function (k) { return K[k].category + (K[k].fusion_kind ? " " + K[k].fusion_kind : ""); }],
           ["fused ops", function (k) { return K[k].fused || K[k].target; }, function (k) { var f = K[k].fused || K[k].target; return f.length > 40 ? f.slice(0, 39) + "…" : f; }],
           ["bytes in", function (k) { return K[k].bytes_in; }, function (k) { return bytes(K[k].bytes_in); }, "num"],
           ["bytes out", function (k) { return K[k].bytes; }, function (k) { return bytes(K[k].bytes); }, "num"],
           ["flops", function (k) { return K[k].flops; }, function (k) { return count(K[k].flops); }, "num"],
           ["intensity", function (k) { return K[k].flops / Math.max(1, K[k].bytes_accessed); }, function (k) { return (K[k].flops / Math.max(1, K[k].bytes_accessed)).toFixed(2); }, "num"],
           [D.profile ? "estimated" : "time", function (k) { return K[k].time; }, function (k) { return seconds(K[k].time); }, "num"]].concat(D.profile ? [
           ["measured", function (k) { return K[k].measured === null ? -1 : K[k].measured; }, function (k) { return K[k].measured === null ? "-" : seconds(K[k].measured); }, "num"]] : []).concat([
           ["op_name", function (k) { return K[k].op_name; }, null, "op"],
           ["source", function (k) { return K[k].source; }, null, "src"]]),
    totals: function (list) {
      var fl = sum(list, function (x) { return x.flops; }), ba = sum(list, function (x) { return x.bytes_accessed; });
      return ["", "total: " + list.length, "", "", bytes(sum(list, function (x) { return x.bytes_in; })),
              bytes(sum(list, function (x) { return x.bytes; })), count(fl), (fl / Math.max(1, ba)).toFixed(2),
              seconds(sum(list, function (x) { return x.time; }))].concat(D.profile ? [
              seconds(sum(list, function (x) { return x.measured || 0; }))] : []).concat(["", ""]);
    },
    after: function (list) { shown.textContent = list.length + " of " + K.length + " kernels"; markKernelRow(); },
    click: function (k) { go("kernels", {k: k}); }});
  var timer = null;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { kFilter.text = input.value.trim().toLowerCase(); kTable.render(); }, 120);
  });
  input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { kFilter.text = input.value.trim().toLowerCase(); kTable.render(); } });
  sel.addEventListener("change", function () { kFilter.kind = sel.value; kTable.render(); });
  el("aside", {id: "kernel-panel", "class": "side"}, "select a kernel to see its HLO, sizes and source line", row);
};
SHOW.kernels = function (box, p) {
  if (!K.length) return;
  if (p.kind !== undefined || p.q !== undefined) {
    kFilter.kind = p.kind || ""; kFilter.text = (p.q || "").toLowerCase();
    document.getElementById("kernel-kind").value = kFilter.kind;
    document.getElementById("kernel-filter").value = p.q || "";
    kTable.render();
  }
  if (p.k !== undefined && K[+p.k]) kernelFacts(+p.k, document.getElementById("kernel-panel"), true);
};
var kSelected = -1;
function markKernelRow() {
  Array.prototype.forEach.call(document.querySelectorAll("#kernel-table tr[data-key]"), function (tr) {
    tr.classList.toggle("selected", +tr.getAttribute("data-key") === kSelected);
  });
}
function kernelFacts(k, p, inKernels) {
  kSelected = k;
  var x = K[k];
  clear(p);
  el("h2", {}, x.name, p);
  var links = el("div", {"class": "bar"}, null, p);
  if (inKernels) link("show in the graph →", "graph", {k: k}, links);
  else link("show in the kernel table →", "kernels", {k: k}, links);
  var t = el("table", {"class": "facts"}, null, p);
  [["kind", x.category + (x.fusion_kind ? " " + x.fusion_kind : "")], ["target", x.target],
   ["fused", x.fused], ["shape", x.shape], ["bytes out", bytes(x.bytes)], ["bytes in", bytes(x.bytes_in)],
   ["bytes accessed", bytes(x.bytes_accessed)], ["flops", count(x.flops)],
   ["time (roofline)", seconds(x.time)], ["op_name", x.op_name], ["source", x.source], ["computation", x.computation]]
    .forEach(function (r) { if (r[1] === "" || r[1] === null) return; var tr = el("tr", {}, null, t); el("th", {}, r[0], tr); el("td", {}, r[1], tr); });
  var ins = [], outs = [];
  D.edges.forEach(function (e) { if (e[1] === k && ins.indexOf(e[0]) < 0) ins.push(e[0]); if (e[0] === k && outs.indexOf(e[1]) < 0) outs.push(e[1]); });
  [["reads from", ins], ["read by", outs]].forEach(function (r) {
    if (!r[1].length) return;
    var pp = el("p", {}, r[0] + ": ", p);
    r[1].slice(0, 8).forEach(function (c, i) { if (i) el("span", {}, ", ", pp); link(K[c].name, inKernels ? "kernels" : "graph", {k: c}, pp); });
    if (r[1].length > 8) el("span", {}, " and " + (r[1].length - 8) + " more", pp);
  });
  el("pre", {"class": "hlo", id: inKernels ? "kernel-hlo" : "panel-hlo"}, x.hlo || "(HLO text left out: see the module file)", p);
  markKernelRow();
}
