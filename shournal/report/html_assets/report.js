/* shournal HTML report: session timeline, command list and details.
 * Vanilla JavaScript, no dependencies, inlined into every report.
 * All journal data comes from the JSON block and is only ever inserted as
 * text (Node.append of strings, textContent, setAttribute), never as markup.
 */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("shournal-data").textContent);
  var cmds = data.commands;
  var byId = new Map();
  cmds.forEach(function (c, i) { c.index = i; byId.set(c.id, c); });
  var SVGNS = "http://www.w3.org/2000/svg";

  // -- helpers ---------------------------------------------------------------

  function h(tag, props) {
    var e = document.createElement(tag);
    for (var k in props || {}) {
      if (k === "class") e.className = props[k];
      else e.setAttribute(k, props[k]);
    }
    for (var i = 2; i < arguments.length; i++) {
      if (arguments[i] !== null && arguments[i] !== undefined) e.append(arguments[i]);
    }
    return e;
  }

  function s(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }

  function pad(n, w) { return String(n).padStart(w || 2, "0"); }

  function fmtDate(ms) {
    var d = new Date(ms);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate());
  }
  function fmtClock(ms, withMs) {
    var d = new Date(ms);
    var t = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
    return withMs ? t + "." + pad(d.getMilliseconds(), 3) : t;
  }
  function fmtTime(ms, withMs) {
    return ms === null || ms === undefined ? "-" : fmtDate(ms) + " " + fmtClock(ms, withMs);
  }
  function fmtDur(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
    var sec = ms / 1000;
    if (sec < 60) return sec.toFixed(sec < 10 ? 2 : 1) + " s";
    var m = Math.floor(sec / 60);
    if (m < 60) return m + " min " + Math.round(sec - m * 60) + " s";
    var hr = Math.floor(m / 60);
    if (hr < 48) return hr + " h " + (m % 60) + " min";
    return Math.floor(hr / 24) + " d " + (hr % 24) + " h";
  }
  function fmtSize(n) {
    if (n < 1024) return n === 1 ? "1 byte" : n + " bytes";
    var v = n, units = ["KiB", "MiB", "GiB", "TiB"], u = 0;
    for (u = 0; u < units.length; u++) {
      v /= 1024;
      if (v < 1024 || u === units.length - 1) break;
    }
    return v.toFixed(2) + " " + units[u];
  }
  function utcOffset(ms) {
    var o = -new Date(ms).getTimezoneOffset(), a = Math.abs(o);
    return "UTC" + (o < 0 ? "-" : "+") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function status(c) { return c.rv === null ? "unk" : c.rv === 0 ? "ok" : "fail"; }
  function clipText(text, n) {
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }
  function clipLeft(text, n) {
    return text.length > n ? "\u2026" + text.slice(text.length - n + 1) : text;
  }

  // -- header ----------------------------------------------------------------

  var meta = plural(cmds.length, "command") + " in " + plural(data.sessions.length, "session");
  if (data.generated !== null) meta += ", generated " + fmtTime(data.generated);
  meta += "; times are local (" + utcOffset(data.generated || Date.now()) + ")";
  document.getElementById("meta").textContent = meta;

  // -- timeline --------------------------------------------------------------

  var LABEL_W = 210, ROW_H = 16, ROW_GAP = 3, LANE_PAD = 6, AXIS_H = 26;
  var MIN_SPAN = 10; // ms: the deepest zoom
  var box = document.getElementById("timeline");
  var lanes = [];
  var height = AXIS_H;
  data.sessions.forEach(function (sess) {
    var laneH = Math.max(2 * LANE_PAD + Math.max(1, sess.rows) * ROW_H, 40);
    lanes.push({ y: height, h: laneH });
    height += laneH;
  });
  height = Math.max(height, AXIS_H + 40);

  var minT = Infinity, maxT = -Infinity;
  cmds.forEach(function (c) {
    minT = Math.min(minT, c.s);
    maxT = Math.max(maxT, c.e, c.s + 1);
  });
  var full;
  if (cmds.length) {
    var span = Math.max(maxT - minT, 1000);
    var mid = (minT + maxT) / 2;
    full = [mid - span * 0.52, mid + span * 0.52];
  } else {
    full = [Date.now() - 3600e3, Date.now()];
  }
  var view = full.slice();
  var width = Math.max(box.clientWidth, LABEL_W + 200);

  var svg = s("svg", { width: width, height: height, "aria-label": "session timeline",
    "data-plot-x": LABEL_W });
  var clip = s("rect", { x: LABEL_W, y: 0, width: width - LABEL_W, height: height });
  var clipPath = s("clipPath", { id: "tl-clip" });
  clipPath.append(clip);
  var defs = s("defs");
  defs.append(clipPath);
  var gLanes = s("g"), gTicks = s("g"), gCmds = s("g", { "clip-path": "url(#tl-clip)" });
  var gLabels = s("g"), gAxis = s("g");
  svg.append(defs, gLanes, gTicks, gCmds, gLabels, gAxis);

  var laneBgs = [];
  data.sessions.forEach(function (sess, i) {
    var lane = lanes[i];
    var bg = s("rect", {
      class: "lane-bg" + (i % 2 ? " odd" : ""), "data-lane": i,
      x: 0, y: lane.y, width: width, height: lane.h,
    });
    laneBgs.push(bg);
    gLanes.append(bg);
    var g = s("g", { class: "lane-label-group", "data-lane": i });
    // where and when the terminal started: its host, its first command's
    // start and directory (of the whole journal when the report knows it)
    var started = (sess.startInReport ? "first here " : "started ") + fmtTime(sess.start);
    var tip = s("title");
    tip.textContent = (sess.id === null ? "commands without a session" : "session " + sess.id) +
      "\n" + sess.users.join(", ") + " @ " + sess.hosts.join(", ") + "\n" + started +
      " in " + sess.cwd + "\n" + plural(sess.n, "command");
    var lbg = s("rect", { class: "lane-label-bg", x: 0, y: lane.y, width: LABEL_W - 4,
      height: lane.h });
    var t1 = s("text", { class: "lane-label", x: 8, y: lane.y + LANE_PAD + 11,
      "data-field": "lane-host" });
    t1.textContent = clipText(sess.host, 12) + " " + fmtTime(sess.start).slice(5, 16);
    g.append(tip, lbg, t1);
    var t2 = s("text", { class: "lane-sub", x: 8, y: lane.y + LANE_PAD + 25,
      "data-field": "lane-cwd" });
    t2.textContent = clipLeft(sess.cwd, 20) + "  " + plural(sess.n, "cmd");
    g.append(t2);
    gLabels.append(g);
  });
  var axisLine = s("line", { class: "axis-line", x1: LABEL_W, y1: AXIS_H - 0.5,
    x2: width, y2: AXIS_H - 0.5 });
  var axisBg = s("rect", { class: "lane-label-bg", x: 0, y: 0, width: LABEL_W - 4,
    height: AXIS_H });
  gAxis.append(axisLine, axisBg);

  var rects = cmds.map(function (c) {
    var lane = lanes[c.lane];
    var r = s("rect", {
      class: "cmd " + status(c), "data-cmd": c.id, "data-lane": c.lane, "data-row": c.row,
      y: lane.y + LANE_PAD + c.row * ROW_H, height: ROW_H - ROW_GAP, x: LABEL_W, width: 2,
    });
    var tip = s("title");
    var text = c.text.length > 300 ? c.text.slice(0, 299) + "\u2026" : c.text;
    tip.textContent = "#" + c.id + "  " + fmtTime(c.s) + "  $?=" +
      (c.rv === null ? "?" : c.rv) + "\n" + text;
    r.append(tip);
    gCmds.append(r);
    return r;
  });
  if (!cmds.length) {
    var none = s("text", { class: "tick-text", x: LABEL_W + 10, y: AXIS_H + 24 });
    none.textContent = "No commands.";
    svg.append(none);
  }
  box.append(svg);

  var STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500];
  [1, 2, 5, 10, 15, 30].forEach(function (n) { STEPS.push(n * 1e3); });
  [1, 2, 5, 10, 15, 30].forEach(function (n) { STEPS.push(n * 60e3); });
  [1, 2, 3, 6, 12].forEach(function (n) { STEPS.push(n * 3600e3); });
  [1, 2, 7, 14, 30, 61, 91, 182, 365, 730, 1826].forEach(function (n) {
    STEPS.push(n * 86400e3);
  });

  function xOf(t) { return LABEL_W + (t - view[0]) / (view[1] - view[0]) * (width - LABEL_W); }
  function tOf(x) { return view[0] + (x - LABEL_W) / (width - LABEL_W) * (view[1] - view[0]); }

  function tickLabel(t, step, first) {
    if (step >= 86400e3) return fmtDate(t);
    var d = new Date(t);
    var midnight = d.getHours() === 0 && d.getMinutes() === 0 && d.getSeconds() === 0 &&
      d.getMilliseconds() === 0;
    var clock = step < 1e3 ? fmtClock(t, true) : step < 60e3 ? fmtClock(t) :
      pad(d.getHours()) + ":" + pad(d.getMinutes());
    return first || midnight ? fmtDate(t) + " " + clock : clock;
  }

  function renderTicks() {
    gTicks.replaceChildren();
    var target = (view[1] - view[0]) / Math.max(1, (width - LABEL_W) / 120);
    var step = STEPS[STEPS.length - 1];
    for (var i = 0; i < STEPS.length; i++) {
      if (STEPS[i] >= target) { step = STEPS[i]; break; }
    }
    // Align ticks to local midnight / whole local units.
    var off = new Date(view[0]).getTimezoneOffset() * 60e3;
    var t = Math.ceil((view[0] - off) / step) * step + off;
    var first = true;
    for (; t <= view[1]; t += step) {
      var x = xOf(t);
      if (x < LABEL_W) continue;
      gTicks.append(s("line", { class: "tick-line", x1: x, y1: AXIS_H, x2: x, y2: height }));
      if (x > width - 70) continue; // its label would be cut at the edge
      var label = s("text", { class: "tick-text", x: x + 3, y: AXIS_H - 8 });
      label.textContent = tickLabel(t, step, first);
      gTicks.append(label);
      first = false;
    }
  }

  function render() {
    pending = false;
    var lo = LABEL_W - 10, hi = width + 10;
    for (var i = 0; i < cmds.length; i++) {
      var c = cmds[i];
      var x0 = xOf(c.s), x1 = xOf(Math.max(c.e, c.s));
      if (x1 < lo || x0 > hi) {
        rects[i].setAttribute("visibility", "hidden");
        continue;
      }
      rects[i].setAttribute("visibility", "visible");
      x0 = Math.max(x0, lo);
      x1 = Math.min(x1, hi);
      rects[i].setAttribute("x", x0.toFixed(1));
      rects[i].setAttribute("width", Math.max(x1 - x0, 2).toFixed(1));
    }
    renderTicks();
    // The visible time range, for tests and for anyone scripting the page.
    svg.setAttribute("data-t0", view[0]);
    svg.setAttribute("data-t1", view[1]);
  }
  var pending = false;
  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(render);
    }
  }

  function setView(t0, t1) {
    var fullSpan = full[1] - full[0];
    var sp = Math.min(Math.max(t1 - t0, MIN_SPAN), fullSpan * 4);
    var center = (t0 + t1) / 2;
    view = [center - sp / 2, center + sp / 2];
    schedule();
  }
  function zoomAt(factor, t) {
    var sp = view[1] - view[0];
    var ns = Math.min(Math.max(sp * factor, MIN_SPAN), (full[1] - full[0]) * 4);
    var f = (t - view[0]) / sp;
    view = [t - f * ns, t - f * ns + ns];
    schedule();
  }

  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    var rect = svg.getBoundingClientRect();
    var x = Math.max(e.clientX - rect.left, LABEL_W);
    var unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      var d = (e.shiftKey ? e.deltaY : e.deltaX) * unit;
      var dt = d / (width - LABEL_W) * (view[1] - view[0]);
      view = [view[0] + dt, view[1] + dt];
      schedule();
      return;
    }
    zoomAt(Math.exp(e.deltaY * unit * 0.0015), tOf(x));
  }, { passive: false });

  var drag = null, dragged = false;
  svg.addEventListener("pointerdown", function (e) {
    if (e.button !== 0) return;
    drag = { x: e.clientX, view: view.slice() };
    dragged = false;
  });
  window.addEventListener("pointermove", function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x;
    if (!dragged && Math.abs(dx) > 3) {
      dragged = true;
      box.classList.add("dragging");
    }
    if (dragged) {
      var dt = dx / (width - LABEL_W) * (drag.view[1] - drag.view[0]);
      view = [drag.view[0] - dt, drag.view[1] - dt];
      schedule();
    }
  });
  window.addEventListener("pointerup", function () {
    drag = null;
    box.classList.remove("dragging");
  });
  svg.addEventListener("click", function (e) {
    if (dragged) {
      dragged = false;
      return;
    }
    var r = e.target.closest("rect.cmd");
    if (r) select(Number(r.getAttribute("data-cmd")), false);
  });

  document.getElementById("zoom-in").addEventListener("click", function () {
    zoomAt(0.5, (view[0] + view[1]) / 2);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    zoomAt(2, (view[0] + view[1]) / 2);
  });
  document.getElementById("zoom-fit").addEventListener("click", function () {
    setView(full[0], full[1]);
  });

  window.addEventListener("resize", function () {
    var w = Math.max(box.clientWidth, LABEL_W + 200);
    if (w === width) return;
    width = w;
    svg.setAttribute("width", width);
    clip.setAttribute("width", width - LABEL_W);
    axisLine.setAttribute("x2", width);
    laneBgs.forEach(function (bg) { bg.setAttribute("width", width); });
    schedule();
  });

  // -- command list ----------------------------------------------------------

  var tbody = document.querySelector("#cmdlist tbody");
  var listWrap = document.getElementById("list-wrap");
  var rows = new Map();
  cmds.slice().sort(function (a, b) { return a.s - b.s || a.id - b.id; }).forEach(function (c) {
    var text = c.text.length > 200 ? c.text.slice(0, 199) + "\u2026" : c.text;
    var tr = h("tr", { "data-cmd": c.id, tabindex: "0" },
      h("td", { class: "num" }, String(c.id)),
      h("td", { class: "time" }, fmtTime(c.s)),
      h("td", { class: c.rv ? "rv-fail" : "" }, c.rv === null ? "?" : String(c.rv)),
      h("td", { class: "text" },
        c.tags.length ? h("span", { class: "tags" }, c.tags.map(function (t) {
          return "#" + t;
        }).join(" ") + " ") : null, text),
      h("td", { class: "cwd" }, c.cwd));
    rows.set(c.id, tr);
    tbody.append(tr);
  });
  function rowFor(e) {
    var tr = e.target.closest("tr[data-cmd]");
    return tr ? Number(tr.getAttribute("data-cmd")) : null;
  }
  tbody.addEventListener("click", function (e) {
    var id = rowFor(e);
    if (id !== null) select(id, true);
  });
  tbody.addEventListener("keydown", function (e) {
    var id = rowFor(e);
    if (id !== null && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      select(id, true);
    }
  });

  var haystacks = null;
  document.getElementById("filter").addEventListener("input", function (e) {
    var q = e.target.value.trim().toLowerCase();
    if (haystacks === null) {
      haystacks = cmds.map(function (c) {
        var parts = [c.text, c.cwd, String(c.id), c.note || ""];
        c.tags.forEach(function (t) { parts.push("#" + t); });
        c.w.forEach(function (f) { parts.push(f.p); });
        c.r.forEach(function (f) { parts.push(f.p); });
        return parts.join("\n").toLowerCase();
      });
    }
    cmds.forEach(function (c, i) {
      var hit = q === "" || haystacks[i].indexOf(q) >= 0;
      rows.get(c.id).hidden = !hit;
      rects[i].classList.toggle("dim", !hit);
    });
  });

  // -- details ---------------------------------------------------------------

  var details = document.getElementById("details");
  var FILE_ROWS = 200; // rendered at once; the rest on request

  function statusCell(st) {
    if (st === null || st === undefined) return h("td", null, "");
    return h("td", { class: "st-" + st.replace(/[^a-z]+/gi, "-").toLowerCase() }, st);
  }

  function contentBlock(index) {
    var content = data.contents[index];
    var summary = "archived content, " + fmtSize(content.size);
    var body;
    if (content.binary) {
      body = h("p", { class: "note" }, "binary data, not shown");
    } else {
      body = h("pre", null, content.text);
      if (content.shown < content.size) {
        summary += " (first " + fmtSize(content.shown) + " shown)";
      }
    }
    var d = h("details", { class: "content" }, h("summary", null, summary), body);
    d.open = true;
    return d;
  }

  function fileRows(tbodyEl, list, from, to, withStatus, isRead) {
    var owner = shown;
    for (var i = from; i < to; i++) {
      var f = list[i];
      var lin = h("button", { type: "button", class: "lin-btn",
        title: "the commands of this report that made this version" }, "lineage");
      lin.addEventListener("click", lineageHandler(f, owner, isRead));
      var tr = h("tr", { "data-file": f.id },
        h("td", { class: "path" }, f.p, " ", lin),
        h("td", { class: "num" }, fmtSize(f.sz)),
        h("td", { class: "mono" }, f.h === null ? "-" : f.h),
        h("td", null, fmtTime(f.mt)));
      if (withStatus) tr.append(statusCell(f.st));
      tbodyEl.append(tr);
      if (isRead && f.c !== null && f.c !== undefined) {
        var cols = withStatus ? 5 : 4;
        tbodyEl.append(h("tr", { class: "content-row" },
          h("td", { colspan: String(cols) }, contentBlock(f.c))));
      }
    }
  }

  function fileSection(list, total, word, isRead) {
    var sec = h("div", { class: "files", "data-kind": word });
    sec.append(h("h3", null, total + " " + word + " file" + (total === 1 ? "" : "s")));
    if (!list.length) return total ? sec : null;
    var withStatus = list.some(function (f) { return f.st !== null && f.st !== undefined; });
    var head = h("tr", null, h("th", null, "path"), h("th", null, "size"), h("th", null, "hash"),
      h("th", null, "mtime"));
    if (withStatus) head.append(h("th", null, "status"));
    var body = h("tbody");
    sec.append(h("table", { class: "files" }, h("thead", null, head), body));
    var shown = Math.min(list.length, FILE_ROWS);
    fileRows(body, list, 0, shown, withStatus, isRead);
    if (shown < list.length) {
      var more = h("button", { type: "button" }, "show " + (list.length - shown) + " more");
      more.addEventListener("click", function () {
        fileRows(body, list, shown, list.length, withStatus, isRead);
        more.remove();
      });
      sec.append(more);
    }
    if (total > list.length) {
      sec.append(h("p", { class: "note" }, "\u2026 and " + (total - list.length) +
        " more files (not included in this report)"));
    }
    return sec;
  }

  // -- lineage of a file version, within this report ----------------------------
  // The rules of `shournal lineage`: a version's writer is found by content
  // (size + hash; without a hash, size + mtime), the latest command that
  // finished before the reader started, preferring the same mtime; a
  // command is never its own writer.  Only the commands in this report take
  // part (`shournal query --lineage-of FILE` makes a report of a whole one).

  var writersByContent = null;
  function contentKey(f) {
    return f.h === null ? "m:" + f.sz + ":" + f.mt : "h:" + f.sz + ":" + f.h;
  }
  function writerOf(f, reader) {
    if (writersByContent === null) {
      writersByContent = new Map();
      cmds.forEach(function (c) {
        c.w.forEach(function (w) {
          var k = contentKey(w);
          if (!writersByContent.has(k)) writersByContent.set(k, []);
          writersByContent.get(k).push({ c: c, f: w });
        });
      });
    }
    var all = (writersByContent.get(contentKey(f)) || []).filter(function (x) {
      return x.c !== reader && x.c.e <= reader.s;
    });
    var strict = all.filter(function (x) { return x.f.mt === f.mt; });
    var best = null;
    (strict.length ? strict : all).forEach(function (x) {
      if (best === null || x.c.e > best.c.e || (x.c.e === best.c.e && x.c.id > best.c.id)) {
        best = x;
      }
    });
    return best === null ? null : best.c;
  }

  function lineageHandler(f, owner, isRead) {
    return function () { showLineage(f, owner, isRead); };
  }

  function markLineage(ids) {
    cmds.forEach(function (c) {
      var on = ids.has(c.id);
      rects[c.index].classList.toggle("lin", on);
      rows.get(c.id).classList.toggle("lin", on);
    });
  }

  function showLineage(f, owner, isRead) {
    var seen = new Set();
    function commandItem(c) {
      var li = h("li", { class: "lin-cmd", "data-cmd": String(c.id) });
      var link = h("a", { href: "#cmd-" + c.id }, "command " + c.id);
      link.addEventListener("click", function (e) { e.preventDefault(); select(c.id, true); });
      li.append(link, " ", h("code", null, c.text.split("\n")[0]),
        h("span", { class: "note" }, " " + fmtTime(c.s) + ", exit " +
          (c.rv === null ? "unknown" : c.rv) + ", in " + c.cwd));
      if (seen.has(c.id)) {
        li.append(h("span", { class: "note" }, " (shown above)"));
        return li;
      }
      seen.add(c.id);
      var own = new Set(c.w.map(function (w) { return w.p + "\0" + contentKey(w); }));
      var inputs = h("ul");
      c.r.forEach(function (r) {
        if (own.has(r.p + "\0" + contentKey(r))) return; // read back what it wrote
        inputs.append(fileItem(r, writerOf(r, c)));
      });
      if (inputs.children.length) li.append(inputs);
      return li;
    }
    function fileItem(v, writer) {
      var li = h("li", { class: writer === null ? "lin-file leaf" : "lin-file" },
        h("span", { class: "path" }, v.p));
      if (writer === null) {
        li.append(h("span", { class: "note" }, " leaf: no command of this report wrote it"));
      } else {
        li.append(h("ul", null, commandItem(writer)));
      }
      return li;
    }
    var writer = isRead ? writerOf(f, owner) : owner;
    details.replaceChildren(h("h2", null, "Lineage"));
    var back = h("button", { type: "button", class: "lin-back" }, "back to command " + owner.id);
    back.addEventListener("click", function () { select(owner.id, false); });
    details.append(back, h("ul", { class: "lineage-tree" }, fileItem(f, writer)));
    details.append(h("p", { class: "note", "data-field": "lineage-count" },
      plural(seen.size, "command") + " of this report in the lineage, newest first"));
    markLineage(seen);
  }

  var shown = null; // the command whose details are on show

  function showDetails(c) {
    shown = c;
    markLineage(new Set());
    var sess = data.sessions[c.lane];
    details.replaceChildren(h("h2", null, "Command " + c.id));
    details.append(h("pre", { class: "cmdtext", "data-field": "text" }, c.text));
    if (c.note !== null) details.append(h("p", { class: "cmdnote", "data-field": "note" }, c.note));
    var dl = h("dl", { class: "props" });
    function prop(name, value, field, cls) {
      dl.append(h("dt", null, name), h("dd", { "data-field": field, class: cls || "" }, value));
    }
    prop("start", fmtTime(c.s, true), "start");
    prop("end", fmtTime(c.e, true), "end");
    prop("duration", fmtDur(c.e - c.s), "duration");
    prop("exit status", c.rv === null ? (c.inc ? "unknown (incomplete: no prompt " +
      "reported its end: exec, exit or hangup)" : "unknown") : String(c.rv), "rv",
      c.rv ? "rv-fail" : "");
    prop("working directory", c.cwd, "cwd", "mono");
    if (c.tags.length) prop("tags", c.tags.join(" "), "tags");
    prop("session", sess.id === null ? "(none)" : sess.id, "session", "mono");
    prop("host", c.host, "host");
    prop("user", c.user, "user");
    prop("hashing", c.hcs === null ? "off" :
      "chunks of " + c.hcs + " bytes, at most " + c.hmr + " reads", "hashing");
    details.append(dl);
    var sections = [fileSection(c.w, c.wc, "written", false)];
    if (c.dw) sections.push(h("p", { class: "note" }, plural(c.dw, "write event") +
      " beyond the per-command cap not stored"));
    sections.push(fileSection(c.r, c.rc, "read", true));
    if (c.dr) sections.push(h("p", { class: "note" }, plural(c.dr, "read event") +
      " beyond the per-command cap not stored"));
    if (c.lost) sections.push(h("p", { class: "note" }, plural(c.lost, "file event") +
      " lost (" + (c.lostWhy || []).map(function (p) { return p[1] + " " + p[0]; }).join(", ") + ")"));
    if (!c.wc && !c.rc) sections.push(h("p", { class: "note" }, "No files recorded."));
    sections.forEach(function (x) { if (x) details.append(x); });
  }

  var selected = null;
  function select(id, reveal) {
    var c = byId.get(id);
    if (!c) return;
    if (selected !== null) {
      rects[selected.index].classList.remove("sel");
      rows.get(selected.id).classList.remove("sel");
    }
    selected = c;
    var r = rects[c.index];
    r.classList.add("sel");
    r.parentNode.append(r); // draw on top
    var tr = rows.get(id);
    tr.classList.add("sel");
    if (reveal && (c.e < view[0] || c.s > view[1])) {
      var sp = view[1] - view[0];
      setView((c.s + c.e) / 2 - sp / 2, (c.s + c.e) / 2 + sp / 2);
    }
    if (!reveal) {
      var top = tr.offsetTop - listWrap.clientHeight / 2;
      listWrap.scrollTop = Math.max(0, top);
    }
    showDetails(c);
    try {
      history.replaceState(null, "", "#cmd-" + id);
    } catch (err) {
      // file:// in some browsers: the deep link is only a convenience
    }
  }

  render();
  var m = /^#cmd-(\d+)$/.exec(location.hash);
  if (m) select(Number(m[1]), true);
  document.body.setAttribute("data-ready", "1");
})();
