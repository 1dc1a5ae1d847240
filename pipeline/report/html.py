"""Static HTML leaderboard: one self-contained page (inline CSS and vanilla JS, no URLs at all).

The rows are plain HTML, so the page reads without JavaScript. With it: clicking a header sorts
by that column (numeric order for numeric columns, missing values last either way; a second click
reverses), a filter box keeps the rows containing every typed word, and the state lives in the
URL hash ``#sort=<column>&dir=asc|desc&filter=<words>``, which is read on load, so a sorted or
filtered view can be linked to. Each cell carries ``data-v``, the value it sorts by (the mean for
metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import pandas as pd

from pipeline.report.render import cell, notes_for, resolve_columns, sort_key
from pipeline.report.tables import PROVENANCE

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem;
       color: #1b1f24; background: #fff; }
h1 { font-size: 1.3rem; margin: 0 0 .75rem; }
.controls { margin: 0 0 .75rem; display: flex; gap: 1rem; align-items: center; }
#filter { font: inherit; padding: .25rem .5rem; min-width: 20rem; }
#count { color: #57606a; }
.wrap { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid #d0d7de; text-align: left;
         white-space: nowrap; vertical-align: top; }
td.num { text-align: right; }
thead th { position: sticky; top: 0; background: #f6f8fa; border-bottom: 2px solid #8c959f; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible { outline: 2px solid #0969da; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
tbody tr:nth-child(even) { background: #fafbfc; }
tbody tr:hover { background: #eef4ff; }
td.prov { font-family: ui-monospace, monospace; font-size: 12px; color: #57606a;
          max-width: 18rem; overflow: hidden; text-overflow: ellipsis; }
.notes { color: #57606a; font-size: 13px; }
"""

_JS = """
(function () {
  "use strict";
  var table = document.getElementById("board");
  var tbody = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var filter = document.getElementById("filter");
  var count = document.getElementById("count");
  var state = { key: "", dir: "asc", q: "" };

  function key(row, i, numeric) {
    var v = row.cells[i].getAttribute("data-v");
    return numeric ? (v === "" ? NaN : parseFloat(v)) : v;
  }
  function missing(v, numeric) { return numeric ? isNaN(v) : v === ""; }

  function sortBy(name, dir) {
    var i = heads.findIndex(function (h) { return h.getAttribute("data-key") === name; });
    if (i < 0) { return false; }
    var numeric = heads[i].getAttribute("data-type") === "num";
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {  // stable: ties keep the previous order
      var x = key(a, i, numeric), y = key(b, i, numeric);
      var mx = missing(x, numeric), my = missing(y, numeric);
      if (mx || my) { return mx === my ? 0 : (mx ? 1 : -1); }
      var c = numeric ? x - y : x.localeCompare(y, undefined, { numeric: true });
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
    heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    heads[i].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    state.key = name; state.dir = dir;
    return true;
  }

  function applyFilter(q) {
    state.q = q;
    var words = q.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
    Array.prototype.forEach.call(tbody.rows, function (r) {
      var text = r.textContent.toLowerCase();
      var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
      r.hidden = !keep; if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + tbody.rows.length + " rows";
  }

  function writeHash() {
    var p = new URLSearchParams();
    if (state.key) { p.set("sort", state.key); p.set("dir", state.dir); }
    if (state.q) { p.set("filter", state.q); }
    try { history.replaceState(null, "", "#" + p.toString()); } catch (e) { /* file: quirks */ }
  }

  function readHash() {
    var p = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (p.get("sort")) { sortBy(p.get("sort"), p.get("dir") === "desc" ? "desc" : "asc"); }
    filter.value = p.get("filter") || "";
    applyFilter(filter.value);
  }

  heads.forEach(function (h) {
    h.addEventListener("click", function () {
      var name = h.getAttribute("data-key");
      sortBy(name, state.key === name && state.dir === "asc" ? "desc" : "asc");
      writeHash();
    });
  });
  filter.addEventListener("input", function () { applyFilter(filter.value); writeHash(); });
  window.addEventListener("hashchange", readHash);
  readHash();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _is_numeric(keys: list[str]) -> bool:
    def number(s: str) -> bool:
        try:
            float(s)
        except ValueError:
            return False
        return True

    present = [k for k in keys if k != ""]
    return bool(present) and all(number(k) for k in present)


def _table_html(table: pd.DataFrame, cols: list[str]) -> str:
    keys = {c: [sort_key(table, i, c) for i in range(len(table))] for c in cols}
    numeric = {c: _is_numeric(keys[c]) for c in cols}
    head = "".join(
        f'<th data-key="{escape(c)}" data-type="{"num" if numeric[c] else "text"}" '
        f'aria-sort="none" scope="col"><button type="button">{escape(c)}</button></th>'
        for c in cols)
    body = []
    for i in range(len(table)):
        tds = []
        for c in cols:
            cls = "prov" if c in PROVENANCE[:-1] else ("num" if numeric[c] else "")
            text = escape(cell(table, i, c))
            tds.append(f'<td class="{cls}" data-v="{escape(keys[c][i])}" title="{text}">'
                       f"{text}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (f'<table id="board"><thead><tr>{head}</tr></thead>\n<tbody>\n'
            + "\n".join(body) + "\n</tbody></table>")


def to_html(table: pd.DataFrame, title: str, notes: str | Sequence[str] | None = None,
            columns: Sequence[str] | None = None) -> str:
    """The whole page as a string; ``notes`` (default ``render.notes_for``) go under the table."""
    cols = resolve_columns(table, columns)
    notes = notes_for(table) if notes is None else [notes] if isinstance(notes, str) else notes
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{escape(title)}</h1>
<p class="controls"><label>Filter <input id="filter" type="search"
 placeholder="words in any column" autocomplete="off"></label><span id="count"></span></p>
<div class="wrap">
{_table_html(table, cols)}
</div>
<ul class="notes">{items}</ul>
<script>{_JS}</script>
</body>
</html>
"""
