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
        row("session", c.sessionUuid || "-")),
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
