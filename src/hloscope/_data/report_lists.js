// -- Collectives: grouped by kind and replica groups (mesh axes), bytes per device and in
// all, the asynchronous ones and what they overlap; every collective, linked to its kernel.
BUILD.collectives = function (box) {
  var cs = S.collectives || [];
  el("h2", {}, "Collectives: " + cs.length + (S.num_partitions > 1 ? " over " + S.num_partitions + " devices" : ""), box);
  if (!cs.length) { el("div", {"class": "info"}, S.num_partitions > 1 ? "no collectives in this module" : "no collectives: a single-device module", box); return; }
  var groups = byKey(cs, function (c) { return c[1] + "\u0000" + (c[5] || "(all devices)"); }, function (c) { return c[3]; });
  var total = 0, recv = 0; cs.forEach(function (c) { total += c[3]; recv += c[7]; });
  el("p", {}, bytes(total) + " sent and " + bytes(recv) + " received per device in all.", box);
  sortTable(box, {id: "collective-groups", rows: groups, page: 50, sort: 3,
    cols: [["kind", function (g) { return g.items[0][1]; }],
           ["replica groups / mesh axes", function (g) { return g.items[0][5] || "(all devices)"; }, null, "op"],
           ["group size", function (g) { return g.items[0][6]; }, null, "num"],
           ["count", function (g) { return g.n; }, null, "num"],
           ["sent per device", function (g) { return g.v; }, function (g) { return bytes(g.v); }, "num"],
           ["share", function (g) { return g.v / Math.max(1, total); }, function (g) { return (100 * g.v / Math.max(1, total)).toFixed(1) + "%"; }, "num"]],
    totals: function (list) { var n = 0, b = 0; list.forEach(function (g) { n += g.n; b += g.v; }); return ["total", "", "", n, bytes(b), ""]; },
    click: function (g) { go("collectives", {kind: g.items[0][1]}); }});
  var hw = D.hardware;
  if (hw && hw.async_collectives && hw.async_collectives.length) {
    el("h3", {}, "Asynchronous collectives and what runs while they move", box);
    sortTable(box, {id: "collective-overlap", rows: hw.async_collectives, page: 30,
      cols: [["collective", function (a) { return a.collective; }], ["start", function (a) { return a.start; }],
             ["bytes", function (a) { return a.bytes; }, function (a) { return bytes(a.bytes); }, "num"],
             ["kernels between", function (a) { return a.between; }, null, "num"],
             ["flops between", function (a) { return a.between_flops; }, function (a) { return count(a.between_flops); }, "num"],
             ["overlap", function (a) { return a.exposed ? 0 : 1; }, function (a) { return a.exposed ? "exposed: nothing to overlap" : a.sync ? "synchronous" : "overlapped"; }],
             ["source", function (a) { return a.source || ""; }, null, "src"]]});
  }
  el("h3", {}, "Every collective, in schedule order", box);
  var ctab = sortTable(box, {id: "collective-list", rows: cs, page: 100,
    filter: function (c) { return !collKind || c[1] === collKind; },
    cols: [["name", function (c) { return c[0]; }], ["kind", function (c) { return c[1]; }],
           ["shape", function (c) { return c[2]; }],
           ["sent per device", function (c) { return c[3]; }, function (c) { return bytes(c[3]); }, "num"],
           ["replica groups", function (c) { return c[5]; }, null, "op"], ["op_name", function (c) { return c[8]; }, null, "op"],
           ["source", function (c) { return c[4]; }, null, "src"]],
    click: function (c) { var k = kernelNamed(c[0]); if (k >= 0) go("kernels", {k: k}); else go("kernels", {q: c[0]}); }});
  collRender = ctab.render;
};
var collKind = "", collRender = null;
SHOW.collectives = function (box, p) { if (collRender && (p.kind || "") !== collKind) { collKind = p.kind || ""; collRender(); } };

// -- Advisor: the grouped findings with their savings, one screen at a time --------------
var advShown = 5;
BUILD.advisor = function (box) {
  el("h2", {}, "Advisor: " + D.findings.length + " group" + (D.findings.length === 1 ? "" : "s") + " of findings, the most valuable first", box);
  if (!D.findings.length) { el("div", {"class": "info"}, K.length ? "nothing to suggest for this module" : "no module in this input: no advice", box); return; }
  var list = el("div", {id: "findings"}, null, box), more = el("button", {type: "button", id: "findings-more"}, "", box);
  function render() {
    clear(list);
    D.findings.slice(0, advShown).forEach(function (f, i) {
      var c = el("div", {"class": "finding", id: "finding-" + i}, null, list);
      el("b", {}, f.rule + " " + (f.kind ? f.kind + ": " : "") + f.title + (f.count > 1 ? " (×" + f.count + ")" : ""), c);
      el("div", {"class": "saving"}, "saves " + f.saving, c);
      if (f.check) el("div", {"class": "check" + (f.check.indexOf("checked") === 0 ? " checked" : "")}, f.check, c);
      el("div", {}, f.message, c);
      el("div", {"class": "try"}, "try: " + f.suggestion, c);
      if (f.places && f.places.length) {
        var t = el("table", {"class": "list places"}, null, c);
        f.places.forEach(function (p) {
          var tr = el("tr", {"class": "clickable"}, null, t);
          el("td", {"class": "op"}, p[0], tr); el("td", {"class": "src"}, p[1], tr); el("td", {"class": "num"}, "×" + p[2], tr);
          tr.addEventListener("click", function () { go("kernels", {q: p[1] || p[0]}); });
        });
      }
      if (f.evidence && f.evidence.length) {
        var ev = el("div", {"class": "muted"}, "evidence: ", c);
        f.evidence.slice(0, 8).forEach(function (name, j) {
          if (j) el("span", {}, ", ", ev);
          var k = kernelNamed(name);
          if (k >= 0) link(name, "kernels", {k: k}, ev); else el("span", {}, name, ev);
        });
      }
    });
    more.textContent = "show " + Math.min(10, D.findings.length - advShown) + " more of " + D.findings.length;
    more.style.display = D.findings.length > advShown ? "" : "none";
  }
  more.addEventListener("click", function () { advShown += 10; render(); });
  render();
  advRender = render;
};
var advRender = null;
SHOW.advisor = function (box, p) {
  if (p.f === undefined || !advRender) return;
  if (+p.f >= advShown) { advShown = +p.f + 1; advRender(); }
  var c = document.getElementById("finding-" + p.f);
  if (c) { c.scrollIntoView({block: "start"}); c.classList.add("selected"); }
};

// -- Source and IR: the shardings with the mesh; the source lines and what they made; the
// program's texts (jaxpr, StableHLO, HLO before and after) with kernel lines linked.
BUILD.source = function (box) {
  shardings(box);
  el("h2", {}, "Source lines and the kernels they made", box);
  if (!K.length) el("div", {"class": "info"}, "no module in this input", box);
  else {
    var lines = byKey(K.map(function (_, i) { return i; }), function (k) { return K[k].source || "(no source line)"; }, function (k) { return K[k].time; });
    sortTable(box, {id: "source-lines", rows: lines, page: 40, sort: 2,
      cols: [["source", function (g) { return g.key; }, null, "src"], ["kernels", function (g) { return g.n; }, null, "num"],
             ["time", function (g) { return g.v; }, function (g) { return seconds(g.v); }, "num"],
             ["bytes accessed", function (g) { var s = 0; g.items.forEach(function (k) { s += K[k].bytes_accessed; }); return s; }, function (g) { var s = 0; g.items.forEach(function (k) { s += K[k].bytes_accessed; }); return bytes(s); }, "num"],
             ["first kernels", function (g) { return g.items.slice(0, 3).map(function (k) { return K[k].name; }).join(", "); }]],
      click: function (g) { go("kernels", {q: g.key === "(no source line)" ? "" : g.key}); }});
  }
  var texts = D.texts || {};
  var names = [["jaxpr", "jaxpr"], ["stablehlo", "StableHLO"], ["hlo_before", "HLO before optimization"], ["hlo_after", "HLO after optimization"]]
    .filter(function (n) { return texts[n[0]]; });
  if (!names.length) { el("p", {"class": "muted"}, "The program's texts (jaxpr, StableHLO, HLO) are in the page of hloscope.inspect(fn, *args).html(); the module file holds the HLO.", box); return; }
  el("h2", {}, "The program's texts", box);
  var bar = el("div", {"class": "bar"}, null, box), pre = el("pre", {"class": "ir", id: "ir-text"}, null, box);
  var moreBtn = el("button", {type: "button", id: "ir-more"}, "", box);
  var names2kernel = {}; K.forEach(function (k, i) { names2kernel[k.name] = i; });
  function showText(key) {
    var lines = texts[key].split("\n"), shown = 0;
    clear(pre);
    function add(n) {
      var end = Math.min(lines.length, shown + n), frag = document.createDocumentFragment();
      for (var i = shown; i < end; i++) {
        var m = key === "hlo_after" ? /^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=/.exec(lines[i]) : null;
        var k = m ? names2kernel[m[1]] : undefined;
        var span = el("span", {"class": k !== undefined ? "line kernel-line" : "line"}, lines[i] + "\n", frag);
        if (k !== undefined) span.addEventListener("click", (function (kk) { return function () { go("kernels", {k: kk}); }; })(k));
      }
      pre.appendChild(frag);
      shown = end;
      moreBtn.textContent = "show more (" + (lines.length - shown) + " lines left)";
      moreBtn.style.display = shown < lines.length ? "" : "none";
    }
    moreBtn.onclick = function () { add(3000); };
    add(3000);
    Array.prototype.forEach.call(bar.children, function (b) { b.className = b.getAttribute("data-text") === key ? "here" : ""; });
  }
  names.forEach(function (n) {
    var b = el("button", {type: "button", "data-text": n[0]}, n[1] + " (" + texts[n[0]].split("\n").length + " lines)", bar);
    b.addEventListener("click", function () { showText(n[0]); });
  });
  if (D.texts_cut) el("p", {"class": "muted"}, D.texts_cut, box);
  showText(names[names.length - 1][0]);
};

function shardings(box) {
  var sh = D.shardings;
  el("h2", {}, "Input and output shardings", box);
  if (!sh || (!(sh.inputs || []).length && !(sh.outputs || []).length)) {
    el("p", {"class": "muted"}, S.num_partitions > 1 ? "no sharding annotations on the entry's parameters and result" : "a single-device program: nothing is sharded", box);
    return;
  }
  if (sh.mesh) el("p", {}, "mesh: " + sh.mesh, box);
  var t = el("table", {"class": "list", id: "shardings"}, null, box), hr = el("tr", {}, null, t);
  ["", "value", "shape", "sharding", "per device"].forEach(function (h) { el("th", {}, h, hr); });
  [["input", sh.inputs || []], ["output", sh.outputs || []]].forEach(function (part) {
    part[1].forEach(function (r) {
      var tr = el("tr", {}, null, t);
      el("td", {}, part[0], tr); el("td", {}, r[0], tr); el("td", {}, r[1], tr); el("td", {"class": "op", title: r[2]}, r[2], tr); el("td", {}, r[3] || "", tr);
    });
  });
}
