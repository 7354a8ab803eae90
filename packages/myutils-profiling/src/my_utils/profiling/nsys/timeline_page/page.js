/* The standalone nsys timeline: draws the JSON block #tl-data on one canvas (myutils-profile nsys timeline --html).
 *
 * Every name in the data comes from an export and is untrusted: it reaches the page through
 * textContent and the canvas only. Times are integer nanoseconds since the first event (time 0).
 * window.nsysTimeline exposes a summary, the view and a hit test (used by the tests, handy in a console).
 */
(function () {
  "use strict";

  var D = JSON.parse(document.getElementById("tl-data").textContent);
  var RULER_H = 30, LABEL_W = 240, ROW_H = 15, LANE_PAD = 3, RANK_H = 24, MIN_VIEW_NS = 20;
  var COLOURS = { kernel: "#4C78A8", nccl: "#E45756", memory: "#54A24B", nvtx: "#B279A2" };
  var DOMAIN_COLOURS = ["#8E6BB8", "#C39BD3", "#7D5BA6", "#A27FC2", "#9C5FA8"];
  var CAT_LABELS = { kernel: "kernel", nccl: "NCCL kernel", memory: "memcpy / memset", nvtx: "NVTX range" };

  var wrap = document.getElementById("tl-wrap");
  var canvas = document.getElementById("tl-canvas");
  var spacer = document.getElementById("tl-spacer");
  var tip = document.getElementById("tl-tooltip");
  var ctx = canvas.getContext("2d");
  var span = Math.max(D.span_ns, 1);
  var binW = D.bins.width_ns;
  var v0 = 0, v1 = span;
  var cssW = 0, cssH = 0, dpr = 1;
  var frames = 0, lastStats = { slices: 0, bins: 0, ms: 0 };

  function colourOf(cat) {
    if (COLOURS[cat]) return COLOURS[cat];
    if (cat.indexOf("nvtx:") === 0) {
      var h = 0;
      for (var i = 0; i < cat.length; i++) h = (h * 31 + cat.charCodeAt(i)) >>> 0;
      return DOMAIN_COLOURS[h % DOMAIN_COLOURS.length];
    }
    return "#9D755D";
  }
  function catLabel(cat) {
    if (CAT_LABELS[cat]) return CAT_LABELS[cat];
    if (cat.indexOf("nvtx:") === 0) return "NVTX range (domain " + cat.slice(5) + ")";
    return cat;
  }
  var catColour = D.cats.map(colourOf);
  // a bin's shade: its category's colour at one of 8 opacities (the share of the bin that is busy)
  var binShades = catColour.map(function (hex) {
    var r = parseInt(hex.slice(1, 3), 16), g = parseInt(hex.slice(3, 5), 16), b = parseInt(hex.slice(5, 7), 16);
    var out = [];
    for (var a = 0; a < 8; a++) out.push("rgba(" + r + "," + g + "," + b + "," + (0.25 + 0.75 * a / 7).toFixed(3) + ")");
    return out;
  });
  function binColour(cat, busy) { return binShades[cat][Math.round(Math.min(1, busy) * 7)]; }

  // ---- decode: per lane, absolute starts from deltas; the longest slice bounds a backward search
  var lanes = D.lanes.map(function (L, index) {
    var n = L.s.length, s = new Float64Array(n), d = new Float64Array(n), t = 0, maxDur = 0;
    for (var i = 0; i < n; i++) { t += L.s[i]; s[i] = t; d[i] = L.d[i]; if (d[i] > maxDur) maxDur = d[i]; }
    var bytes = new Map();
    (L.b || []).forEach(function (p) { bytes.set(p[0], p[1]); });
    var bins = L.bins || { i: [], z: [], n: [], d: [], c: [] };
    return { index: index, doc: L, rank: L.rank, name: L.name, rows: L.rows, s: s, d: d, k: L.k, c: L.c,
             z: L.z || null, bytes: bytes, maxDur: maxDur, bins: bins, binned: bins.n.reduce(sum, 0) };
  });
  function sum(a, b) { return a + b; }

  // ---- vertical layout: per rank a header row, then its lanes
  var items = [], contentH = 0, laneTop = new Array(lanes.length);
  D.ranks.forEach(function (R, r) {
    items.push({ kind: "rank", y: contentH, h: RANK_H, rank: r });
    contentH += RANK_H;
    R.lanes.forEach(function (li) {
      var h = lanes[li].rows * ROW_H + 2 * LANE_PAD;
      items.push({ kind: "lane", y: contentH, h: h, lane: li });
      laneTop[li] = contentH;
      contentH += h;
    });
  });
  var itemYs = items.map(function (it) { return it.y; });

  // ---- formatting
  function group(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function fixed(x, digits) {
    var t = Math.abs(x).toFixed(digits), parts = t.split(".");
    return (x < 0 ? "-" : "") + group(parts[0]) + (parts.length > 1 ? "." + parts[1] : "");
  }
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a < 1e3) return fixed(ns, 0) + " ns";
    if (a < 1e6) return fixed(ns / 1e3, 3) + " µs";
    if (a < 1e9) return fixed(ns / 1e6, 3) + " ms";
    return fixed(ns / 1e9, 3) + " s";
  }
  function fmtAt(ns) {  // a point in time, to the nanosecond
    return Math.abs(ns) < 1e9 ? fixed(ns / 1e6, 6) + " ms" : fixed(ns / 1e9, 9) + " s";
  }
  function fmtBytes(b) {
    var u = ["B", "kB", "MB", "GB", "TB"], x = b, i = 0;
    while (x >= 1000 && i < u.length - 1) { x /= 1000; i++; }
    return group(b) + " B" + (i ? " (" + x.toFixed(2) + " " + u[i] + ")" : "");
  }

  // ---- header, legend and lane table (textContent only: names are data)
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function header() {
    var ranks = D.ranks, shown = D.events, total = ranks.reduce(function (a, r) { return a + r.events; }, 0);
    var parts = [ranks.length + " export" + (ranks.length === 1 ? "" : "s"),
                 group(shown) + " of " + group(total) + " events shown",
                 "span " + fmtDur(D.span_ns)];
    if (D.clock.origin_utc) parts.push("time 0 = " + D.clock.origin_utc);
    document.getElementById("tl-summary").textContent = parts.join(" · ");
    var body = document.querySelector("#tl-exports tbody");
    ranks.forEach(function (R) {
      var tr = document.createElement("tr");
      [R.rank, R.label, R.version, R.gpus.length ? R.gpus.join(", ") : "not recorded",
       R.first_ns === null ? "–" : fmtAt(R.first_ns), R.last_ns === null ? "–" : fmtAt(R.last_ns),
       R.first_ns === null ? "–" : fmtDur(R.last_ns - R.first_ns), group(R.kept) + " of " + group(R.events),
       R.left_out ? group(R.left_out) : "none"].forEach(function (v, i) {
        var td = el("td", v, i >= 7 ? "num" : "");
        if (i === 1) td.title = String(v);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    var notes = document.getElementById("tl-notes");
    notes.appendChild(el("li", D.clock.note));
    ranks.forEach(function (R) {
      if (!R.left_out) return;
      notes.appendChild(el("li", "rank " + R.rank + " (" + R.label + "): " + group(R.left_out) + " of " +
        group(R.events) + " events left out: --max-events " + group(D.max_events) + " keeps each rank's first " +
        group(D.per_rank) + " events in start order" +
        (R.last_start_ns === null ? "" : " (what is shown of this rank starts before " + fmtAt(R.last_start_ns) + ")"),
        "warn"));
    });
    var B = D.bins;
    if (B.slices) {
      notes.appendChild(el("li", group(B.slices) + " slices shorter than " + fmtDur(B.below_ns) + " are merged into " +
        "density bins " + fmtDur(B.width_ns) + " wide (" + B.pixels + " px of the full view) on " + B.lanes + " lane" +
        (B.lanes === 1 ? "" : "s") + " (--bins " + B.mode + (B.mode === "auto" ? ": the page would hold more than " +
        group(B.max_slices) + " slices, so it keeps the longest " + group(B.max_slices) : "") +
        "); a bin's shade is the share of it that is busy"));
    } else {
      notes.appendChild(el("li", "every slice is drawn (no density bins)"));
    }
    if (D.names_cut.count) {
      notes.appendChild(el("li", group(D.names_cut.count) + " name" + (D.names_cut.count === 1 ? "" : "s") +
        " longer than " + D.names_cut.chars + " characters cut" + (D.names_cut.shortened ? " (" +
        group(D.names_cut.shortened) + " to " + D.names_cut.short_chars + " once the page's names budget was spent)"
        : "") + "; the Chrome/Perfetto trace keeps them whole"));
    }
    if (!D.events) notes.appendChild(el("li", "these exports hold no GPU work and no NVTX range", "warn"));
    var legend = document.getElementById("tl-legend");
    var present = {};
    lanes.forEach(function (L) { L.c.forEach(function (c) { present[c] = 1; }); L.bins.c.forEach(function (c) { present[c] = 1; }); });
    D.cats.forEach(function (cat, i) {
      if (!present[i]) return;
      var key = el("span", null, "tl-key"), sw = el("span", null, "tl-swatch");
      sw.style.background = catColour[i];
      key.appendChild(sw);
      key.appendChild(el("span", catLabel(cat)));
      legend.appendChild(key);
    });
    if (B.slices) {
      var key = el("span", null, "tl-key"), sw = el("span", null, "tl-swatch");
      sw.style.background = "repeating-linear-gradient(90deg, #777 0 2px, #ccc 2px 4px)";
      key.appendChild(sw);
      key.appendChild(el("span", "density bin (slices below " + fmtDur(B.below_ns) + ")"));
      legend.appendChild(key);
    }
    var lt = document.querySelector("#tl-lanes tbody");
    lanes.forEach(function (L) {
      var tr = document.createElement("tr");
      [D.ranks[L.rank].rank, L.name, group(L.doc.n), group(L.binned), fmtDur(L.doc.dur_ns)].forEach(function (v, i) {
        tr.appendChild(el("td", v, i >= 2 ? "num" : ""));
      });
      tr.dataset.lane = String(L.index);
      lt.appendChild(tr);
    });
    document.querySelector("#tl-lanes summary").textContent = "Lanes (" + lanes.length + ")";
  }

  // ---- geometry
  function plotW() { return Math.max(cssW - LABEL_W, 10); }
  function scale() { return plotW() / (v1 - v0); }
  function xAt(t) { return LABEL_W + (t - v0) * scale(); }
  function timeAt(x) { return v0 + (x - LABEL_W) / scale(); }
  function lowerBound(a, x) { var lo = 0, hi = a.length; while (lo < hi) { var m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; } return lo; }
  function upperBound(a, x) { var lo = 0, hi = a.length; while (lo < hi) { var m = (lo + hi) >> 1; if (a[m] <= x) lo = m + 1; else hi = m; } return lo; }

  function resize() {
    dpr = window.devicePixelRatio || 1;
    // as tall as the lanes need, at most three quarters of the window (then the lanes scroll)
    wrap.style.height = Math.max(160, Math.min(RULER_H + contentH + 8, Math.round(window.innerHeight * 0.75))) + "px";
    cssW = wrap.clientWidth;
    cssH = wrap.clientHeight;
    canvas.style.height = cssH + "px";
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    spacer.style.height = Math.max(0, RULER_H + contentH + 8 - cssH) + "px";
    draw();
  }

  // ---- drawing
  var pending = false;
  function schedule() { if (!pending) { pending = true; window.requestAnimationFrame(function () { pending = false; draw(); }); } }

  function cutText(text, width) {
    if (ctx.measureText(text).width <= width) return text;
    var lo = 0, hi = text.length;
    while (lo < hi) { var m = (lo + hi + 1) >> 1; if (ctx.measureText(text.slice(0, m) + "…").width <= width) lo = m; else hi = m - 1; }
    return lo ? text.slice(0, lo) + "…" : "";
  }

  function drawBins(L, y) {
    var B = L.bins;
    if (!B.i.length) return 0;
    var sc = scale(), lo = lowerBound(B.i, Math.floor(v0 / binW)), hi = upperBound(B.i, Math.floor(v1 / binW)), n = 0;
    var fill = "";
    for (var j = lo; j < hi; j++) {
      var x0 = xAt(B.i[j] * binW), w = Math.max(1, binW * sc);
      if (x0 + w < LABEL_W) continue;
      if (x0 < LABEL_W) { w -= LABEL_W - x0; x0 = LABEL_W; }
      var colour = binColour(B.c[j], B.d[j] / binW);
      if (colour !== fill) { ctx.fillStyle = colour; fill = colour; }
      ctx.fillRect(x0, y + LANE_PAD + B.z[j] * ROW_H, w, ROW_H - 1);
      n++;
    }
    return n;
  }

  function drawLane(L, y) {
    var sc = scale(), s = L.s, d = L.d, z = L.z, n = 0, fill = "";
    var lo = lowerBound(s, v0 - L.maxDur), hi = upperBound(s, v1);
    var covered = new Float64Array(L.rows).fill(-Infinity);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    for (var i = lo; i < hi; i++) {
      var x0 = LABEL_W + (s[i] - v0) * sc, x1 = x0 + d[i] * sc;
      if (x1 < LABEL_W) continue;
      var row = z ? z[i] : 0, ry = y + LANE_PAD + row * ROW_H;
      if (x0 < LABEL_W) x0 = LABEL_W;
      if (x1 - x0 < 1) {  // below a pixel: one mark per pixel column and row is enough
        var px = Math.floor(x0);
        if (px <= covered[row]) continue;
        covered[row] = px;
        x1 = px + 1; x0 = px;
      } else {
        covered[row] = Math.max(covered[row], Math.floor(x1) - 1);
      }
      var colour = catColour[L.c[i]];
      if (colour !== fill) { ctx.fillStyle = colour; fill = colour; }
      var w = x1 - x0;
      ctx.fillRect(x0, ry, w > 2 ? w - 0.5 : w, ROW_H - 1);
      n++;
      if (w > 40) {
        var text = cutText(D.names[L.k[i]], w - 6);
        if (text) { ctx.fillStyle = "#fff"; fill = ""; ctx.fillText(text, x0 + 3, ry + ROW_H / 2); }
      }
    }
    return n;
  }

  function niceStep(x) {
    var p = Math.pow(10, Math.floor(Math.log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function drawRuler() {
    ctx.fillStyle = "#f7f7f9";
    ctx.fillRect(0, 0, cssW, RULER_H);
    ctx.fillStyle = "#1d1d1f";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    var step = niceStep((v1 - v0) * 110 / plotW());
    var unit = step < 1e3 ? [1, "ns"] : step < 1e6 ? [1e3, "µs"] : step < 1e9 ? [1e6, "ms"] : [1e9, "s"];
    var digits = Math.max(0, -Math.floor(Math.log10(step / unit[0]) + 1e-9));
    ctx.fillText("time (" + unit[1] + ")", 8, RULER_H / 2);
    ctx.strokeStyle = "#9aa0a6";
    ctx.beginPath();
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = Math.round(xAt(t)) + 0.5;
      if (x < LABEL_W) continue;
      ctx.moveTo(x, RULER_H - 8); ctx.lineTo(x, RULER_H);
      ctx.fillText(fixed(t / unit[0], digits) + " " + unit[1], x + 3, RULER_H / 2 - 3);
    }
    ctx.stroke();
    ctx.fillStyle = "#d9d9de";
    ctx.fillRect(0, RULER_H - 1, cssW, 1);
  }

  function drawGrid(top) {  // faint tick lines across the lanes
    var step = niceStep((v1 - v0) * 110 / plotW());
    ctx.fillStyle = "rgba(0,0,0,0.06)";
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = Math.round(xAt(t));
      if (x >= LABEL_W) ctx.fillRect(x, top, 1, cssH - top);
    }
  }

  function draw() {
    var t0 = performance.now(), nSlices = 0, nBins = 0;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, cssW, cssH);
    var off = wrap.scrollTop - RULER_H;
    drawGrid(RULER_H);
    var first = Math.max(0, upperBound(itemYs, off) - 1);
    for (var k = first; k < items.length; k++) {
      var it = items[k], y = it.y - off;
      if (y > cssH) break;
      if (y + it.h < RULER_H) continue;
      if (it.kind === "rank") {
        var R = D.ranks[it.rank];
        ctx.fillStyle = "#eceff4";
        ctx.fillRect(0, y, cssW, it.h);
        ctx.fillStyle = "#1d1d1f";
        ctx.font = "600 12px system-ui, sans-serif";
        ctx.textBaseline = "middle";
        var head = "rank " + R.rank + " · " + R.label + " · " + (R.gpus.length ? R.gpus.join(", ") : "GPU not recorded") +
          " · nsys " + R.version + (R.left_out ? " · " + group(R.left_out) + " events left out" : "") +
          (R.events ? "" : " · no GPU work and no NVTX range in this export");
        ctx.fillText(cutText(head, cssW - 16), 8, y + it.h / 2);
        continue;
      }
      var L = lanes[it.lane];
      ctx.fillStyle = it.lane % 2 ? "#fbfbfc" : "#ffffff";
      ctx.fillRect(0, y, LABEL_W, it.h);
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_W, y, cssW - LABEL_W, it.h);
      ctx.clip();
      nBins += drawBins(L, y);
      nSlices += drawLane(L, y);
      ctx.restore();
      ctx.fillStyle = "#1d1d1f";
      ctx.font = "12px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      ctx.fillText(cutText(L.name, LABEL_W - 20), 18, y + LANE_PAD + ROW_H / 2);
      ctx.fillStyle = "#eceff4";
      ctx.fillRect(0, y + it.h - 1, cssW, 1);
      ctx.fillStyle = "#d9d9de";
      ctx.fillRect(LABEL_W - 1, y, 1, it.h);
    }
    if (selection) {
      var a = Math.max(LABEL_W, Math.min(selection.x0, selection.x1)), b = Math.min(cssW, Math.max(selection.x0, selection.x1));
      ctx.fillStyle = "rgba(66, 133, 244, 0.18)";
      ctx.fillRect(a, RULER_H, b - a, cssH - RULER_H);
    }
    drawRuler();
    frames++;
    lastStats = { slices: nSlices, bins: nBins, ms: performance.now() - t0 };
    document.getElementById("tl-window").textContent = fmtAt(v0) + " – " + fmtAt(v1) + " (" + fmtDur(v1 - v0) +
      " of " + fmtDur(D.span_ns) + ")";
  }

  // ---- hit test: the slice (or bin) under a time on a lane row
  function describeSlice(L, i) {
    var cat = D.cats[L.c[i]], out = {
      kind: "slice", lane: L.index, laneName: L.name, rank: D.ranks[L.rank].rank, index: i,
      name: D.names[L.k[i]], cat: cat, start: L.s[i], dur: L.d[i], depth: L.z ? L.z[i] : 0
    };
    if (L.bytes.has(i)) out.bytes = L.bytes.get(i);
    return out;
  }
  function hitTest(laneIndex, t, depth, tolNs) {
    var L = lanes[laneIndex];
    if (!L) return null;
    var tol = tolNs || 0, s = L.s, d = L.d, best = null, bestGap = Infinity;
    for (var i = upperBound(s, t + tol) - 1; i >= 0 && s[i] >= t - tol - L.maxDur; i--) {
      var row = L.z ? L.z[i] : 0;
      if (depth !== undefined && depth !== null && row !== depth) continue;
      var gap = t < s[i] ? s[i] - t : t > s[i] + d[i] ? t - s[i] - d[i] : 0;
      if (gap > tol) continue;
      // inside beats near; then the deepest row; then the shortest slice
      if (best === null || gap < bestGap || (gap === bestGap && (row > best.depth || (row === best.depth && d[i] < best.dur)))) {
        best = describeSlice(L, i);
        bestGap = gap;
      }
    }
    if (best) return best;
    var B = L.bins;
    if (B.i.length && binW) {
      var bi = Math.floor(t / binW);
      for (var j = lowerBound(B.i, bi); j < B.i.length && B.i[j] === bi; j++) {
        if (depth !== undefined && depth !== null && B.z[j] !== depth) continue;
        return { kind: "bin", lane: L.index, laneName: L.name, rank: D.ranks[L.rank].rank, cat: D.cats[B.c[j]],
                 start: bi * binW, dur: binW, count: B.n[j], busy: B.d[j], depth: B.z[j] };
      }
    }
    return null;
  }
  function pick(clientX, clientY) {
    var r = canvas.getBoundingClientRect(), x = clientX - r.left, y = clientY - r.top;
    if (x < LABEL_W || y < RULER_H || x > cssW || y > cssH) return null;
    var cy = y + wrap.scrollTop - RULER_H;
    for (var k = 0; k < items.length; k++) {
      var it = items[k];
      if (cy >= it.y && cy < it.y + it.h) {
        if (it.kind !== "lane") return null;
        var depth = Math.floor((cy - it.y - LANE_PAD) / ROW_H);
        if (depth < 0 || depth >= lanes[it.lane].rows) return null;
        return hitTest(it.lane, timeAt(x), depth, 2 / scale());
      }
    }
    return null;
  }
  function locate(laneIndex, i) {  // the client point at the middle of a slice, its lane scrolled into view
    var L = lanes[laneIndex], row = L.z ? L.z[i] : 0;
    var top = laneTop[laneIndex] + LANE_PAD + row * ROW_H;
    if (top < wrap.scrollTop || top + ROW_H + RULER_H > wrap.scrollTop + cssH) wrap.scrollTop = Math.max(0, top - 40);
    wrap.scrollIntoView({ block: "nearest" });
    draw();
    var r = canvas.getBoundingClientRect();
    var a = Math.max(L.s[i], v0), b = Math.min(L.s[i] + L.d[i], v1);
    return { x: r.left + xAt((a + b) / 2), y: r.top + RULER_H + top - wrap.scrollTop + ROW_H / 2 };
  }

  function showTip(hit, clientX, clientY) {
    if (!hit) { tip.hidden = true; return; }
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    var lines = [];
    if (hit.kind === "slice") {
      tip.appendChild(el("div", hit.name, "tl-name"));
      lines.push(catLabel(hit.cat) + " · rank " + hit.rank + " · " + hit.laneName + (hit.depth ? " · depth " + hit.depth : ""));
      lines.push("start " + fmtAt(hit.start) + " · end " + fmtAt(hit.start + hit.dur));
      lines.push("duration " + fmtDur(hit.dur));
      if (hit.bytes !== undefined) {
        lines.push("bytes " + fmtBytes(hit.bytes) + (hit.dur > 0 ? " · " + (hit.bytes / hit.dur).toFixed(2) + " GB/s" : ""));
      }
      var cut = D.names_cut;
      if (cut.count && hit.name.slice(-1) === "…" && (hit.name.length === cut.chars + 1 || hit.name.length === cut.short_chars + 1)) {
        lines.push("(name cut; the trace keeps it whole)");
      }
    } else {
      tip.appendChild(el("div", group(hit.count) + " slice" + (hit.count === 1 ? "" : "s") + " in a density bin", "tl-name"));
      lines.push(catLabel(hit.cat) + " (most of its time) · rank " + hit.rank + " · " + hit.laneName);
      lines.push("each shorter than " + fmtDur(D.bins.below_ns) + "; busy " + fmtDur(hit.busy) + " of " + fmtDur(hit.dur));
      lines.push("bin " + fmtAt(hit.start) + " – " + fmtAt(hit.start + hit.dur));
    }
    lines.forEach(function (line) { tip.appendChild(el("div", line)); });
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.min(clientX + 14, window.innerWidth - w - 4) + "px";
    tip.style.top = (clientY + 16 + h > window.innerHeight ? clientY - h - 8 : clientY + 16) + "px";
  }

  // ---- view changes
  function setView(a, b) {
    var w = Math.max(b - a, MIN_VIEW_NS), pad = span * 0.05;
    w = Math.min(w, span + 2 * pad);
    a = Math.max(-pad, Math.min(a, span + pad - w));
    v0 = a; v1 = a + w;
    schedule();
  }
  function zoom(factor, atX) {
    var t = timeAt(atX === undefined ? LABEL_W + plotW() / 2 : atX), w = (v1 - v0) * factor;
    setView(t - (t - v0) * factor, t - (t - v0) * factor + w);
  }
  function pan(ns) { setView(v0 + ns, v1 + ns); }

  var drag = null, selection = null, lastX;
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    var unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? cssH : 1;
    var dx = e.deltaX * unit, dy = e.deltaY * unit;
    if (e.shiftKey) { wrap.scrollTop += dy || dx; return; }
    if (Math.abs(dx) > Math.abs(dy)) { pan(dx / scale()); return; }
    var r = canvas.getBoundingClientRect();
    zoom(Math.exp(dy * 0.002), e.clientX - r.left);
  }, { passive: false });
  canvas.addEventListener("mousedown", function (e) {
    var r = canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    tip.hidden = true;
    if (y < RULER_H || e.shiftKey || e.altKey) { selection = { x0: x, x1: x }; }
    else { drag = { x: e.clientX, y: e.clientY, v0: v0, v1: v1, top: wrap.scrollTop }; canvas.classList.add("dragging"); }
    e.preventDefault();
  });
  window.addEventListener("mousemove", function (e) {
    var r = canvas.getBoundingClientRect();
    lastX = e.clientX - r.left;
    if (selection) { selection.x1 = lastX; schedule(); return; }
    if (drag) {
      var dt = (e.clientX - drag.x) / scale();
      setView(drag.v0 - dt, drag.v1 - dt);
      wrap.scrollTop = drag.top - (e.clientY - drag.y);
      return;
    }
    if (e.target === canvas) showTip(pick(e.clientX, e.clientY), e.clientX, e.clientY); else tip.hidden = true;
  });
  window.addEventListener("mouseup", function () {
    if (selection) {
      var a = timeAt(Math.min(selection.x0, selection.x1)), b = timeAt(Math.max(selection.x0, selection.x1));
      selection = null;
      if (Math.abs(b - a) * scale() >= 4) setView(a, b); else schedule();
    }
    drag = null;
    canvas.classList.remove("dragging");
  });
  canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
  canvas.addEventListener("dblclick", function () { setView(0, span); });
  wrap.addEventListener("scroll", function () { tip.hidden = true; schedule(); });
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var k = e.key.toLowerCase(), w = v1 - v0;
    if (k === "w") zoom(0.8, lastX); else if (k === "s") zoom(1.25, lastX);
    else if (k === "a") pan(-w * 0.2); else if (k === "d") pan(w * 0.2);
    else if (k === "0") setView(0, span); else return;
    e.preventDefault();
  });
  document.getElementById("tl-zoom-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("tl-zoom-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("tl-reset").addEventListener("click", function () { setView(0, span); });
  window.addEventListener("resize", resize);

  header();
  resize();

  window.nsysTimeline = {
    ready: true,
    summary: function () {
      return {
        ranks: D.ranks.map(function (R) { return { rank: R.rank, label: R.label, gpus: R.gpus, events: R.events, kept: R.kept, left_out: R.left_out, lanes: R.lanes.length }; }),
        lanes: lanes.map(function (L) {
          return { rank: D.ranks[L.rank].rank, name: L.name, events: L.doc.n, slices: L.s.length, binned: L.binned, dur_ns: L.doc.dur_ns };
        }),
        events: D.events, binned: D.bins.slices, span_ns: D.span_ns
      };
    },
    view: function () { return { start: v0, end: v1 }; },
    setView: function (a, b) { setView(a, b); draw(); },
    hitTest: hitTest,
    pick: pick,
    locate: locate,
    frames: function () { return frames; },
    lastDraw: function () { return lastStats; }
  };
  document.documentElement.setAttribute("data-timeline-ready", "1");
})();
