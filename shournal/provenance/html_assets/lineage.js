/* shournal lineage page: a click on a node of the graph shows its details.
 * Vanilla JavaScript, inlined into every page.  Journal data comes from the
 * JSON block and is only ever inserted as text, never as markup.
 */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("shournal-data").textContent);
  var commands = new Map();
  data.commands.forEach(function (c) { commands.set(String(c.id), c); });
  var files = new Map();
  data.files.forEach(function (f) { files.set(f.id, f); });
  var panel = document.getElementById("details");

  function h(tag, props) {
    var e = document.createElement(tag);
    for (var k in props || {}) e.setAttribute(k, props[k]);
    for (var i = 2; i < arguments.length; i++) {
      if (arguments[i] !== null && arguments[i] !== undefined) e.append(arguments[i]);
    }
    return e;
  }

  function row(key, value) {
    return h("tr", {}, h("td", {"class": "k"}, key), h("td", {}, String(value)));
  }

  function fileItem(ev) {
    var text = ev.path + " (" + ev.size + " bytes, hash " + (ev.hash || "-") + ")";
    if (ev.isStoredToDisk) text += " [archived script, file id " + ev.id + "]";
    return h("li", {}, text);
  }

  function edgesOf(kind, key, value) {
    return data.edges.filter(function (e) { return e.type === kind && e[key] === value; });
  }

  function showCommand(c) {
    var reads = h("ul", {});
    c.fileReadEvents.forEach(function (ev) { reads.append(fileItem(ev)); });
    var writes = h("ul", {});
    c.fileWriteEvents.forEach(function (ev) { writes.append(fileItem(ev)); });
    panel.replaceChildren(
      h("h2", {}, "Command " + c.id),
      h("pre", {"class": "cmdtext"}, c.command),
      h("table", {},
        row("start", c.startTime), row("end", c.endTime),
        row("exit status", c.returnValue === null ? "unknown" : c.returnValue),
        row("working directory", c.workingDir),
        row("user@host", c.username + "@" + c.hostname),
        row("session", c.sessionUuid || "-"),
        c.note ? row("note", c.note) : null,
        c.tags && c.tags.length ? row("tags", c.tags.join(" ")) : null),
      h("h3", {}, "Read (" + c.fileReadEvents.length + ")"), reads,
      h("h3", {}, "Written (" + c.fileWriteEvents.length + ")"), writes);
  }

  function showFile(f) {
    var writer = edgesOf("wrote", "file", f.id)[0];
    var readers = edgesOf("read", "file", f.id).map(function (e) { return e.command; });
    var made = f.leaf ? "no recorded command (a leaf)"
      : writer ? "command " + writer.command + (writer.writtenPath ? " as " + writer.writtenPath : "")
      + (writer.otherCandidates ? " (" + writer.otherCandidates + " other writers)" : "")
      : f.truncated ? "not followed (--depth)" : "-";
    panel.replaceChildren(
      h("h2", {}, "File version"),
      h("pre", {}, f.path),
      h("table", {},
        row("size", f.size + " bytes"), row("mtime", f.mtime), row("hash", f.hash || "-"),
        row("written by", made),
        row("read by", readers.length ? "command " + readers.join(", ") : "-"),
        row("archived", f.archivedId === null ? "no" : "file id " + f.archivedId)));
  }

  // -- layout: dagre (vendored before this script) ------------------------------
  // Layers left to right with crossing reduction; the page's own layering
  // (drawn by shournal) stays when dagre is missing or fails.
  var SVGNS = "http://www.w3.org/2000/svg";
  function layout() {
    var svg = document.getElementById("graph");
    if (typeof dagre === "undefined") return;
    var g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 16, ranksep: 50, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(function () { return {}; });
    var nodes = new Map();
    svg.querySelectorAll(".node").forEach(function (n) {
      var key = (n.classList.contains("cmd") ? "c:" : "f:") + n.getAttribute("data-id");
      var box = n.querySelector("rect");
      nodes.set(key, n);
      g.setNode(key, { width: Number(box.getAttribute("width")),
                       height: Number(box.getAttribute("height")) });
    });
    var lines = Array.prototype.slice.call(svg.querySelectorAll("line.edge"));
    lines.forEach(function (l) {
      var a = l.getAttribute("data-from"), b = l.getAttribute("data-to");
      if (nodes.has(a) && nodes.has(b)) g.setEdge(a, b);
    });
    dagre.layout(g);
    nodes.forEach(function (n, key) {
      var p = g.node(key);
      n.setAttribute("transform", "translate(" + (p.x - p.width / 2) + "," +
        (p.y - p.height / 2) + ")");
    });
    lines.forEach(function (l) {
      var a = l.getAttribute("data-from"), b = l.getAttribute("data-to");
      var e = g.edge(a, b);
      if (!e) return;
      var d = e.points.map(function (pt, i) {
        return (i ? "L" : "M") + pt.x.toFixed(1) + "," + pt.y.toFixed(1);
      }).join(" ");
      var path = document.createElementNS(SVGNS, "path");
      path.setAttribute("class", "edge");
      path.setAttribute("d", d);
      path.setAttribute("data-from", a);
      path.setAttribute("data-to", b);
      path.setAttribute("marker-end", "url(#arrow)");
      l.replaceWith(path);
    });
    var size = g.graph();
    svg.setAttribute("width", Math.ceil(size.width));
    svg.setAttribute("height", Math.ceil(size.height));
    svg.setAttribute("data-layout", "dagre");
  }
  try {
    layout();
  } catch (err) {
    // the page's own layering stays; say why where a reader looks
    document.getElementById("graph").setAttribute("data-layout-error", String(err));
  }

  var selected = null;
  document.getElementById("graph").addEventListener("click", function (ev) {
    var node = ev.target.closest(".node");
    if (!node) return;
    if (selected) selected.classList.remove("selected");
    selected = node;
    node.classList.add("selected");
    var id = node.getAttribute("data-id");
    if (node.classList.contains("cmd")) showCommand(commands.get(id));
    else showFile(files.get(id));
  });
})();
