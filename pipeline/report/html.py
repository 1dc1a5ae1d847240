"""HTML leaderboard: one self-contained page (inline CSS, vanilla JS, figures as data: URIs).

The header says the setting, the level and the provenance; the table has one row per setting,
ranked by the primary metric, best values highlighted; each header's tooltip is the registry's
description. Rows are plain HTML, so the page reads without JavaScript. With it: clicking a header
sorts by that column (numeric order, missing values last; a second click reverses), a filter box
keeps the rows containing every typed word, a row's button shows its details (every metric of
``report.metrics``, the controls, the provenance), and the state lives in the URL hash
``#sort=<column>&dir=asc|desc&filter=<words>`` (read on load, so a view can be linked to).
Each setting is one ``<tbody>`` (its row and its details), so sorting keeps them together.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape
from typing import Any

from pipeline.metrics import NOT_MEASURED, lookup
from pipeline.report.board import Board
from pipeline.report.render import (
    axis_header,
    entry,
    fmt_interval,
    fmt_value,
    is_missing,
    pct,
    text_columns,
)

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.25rem;
       color: #1b1f24; background: #fff; max-width: 1320px; }
h1 { font-size: 1.3rem; margin: 0 0 .25rem; }
h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
.setting { margin: 0 0 .25rem; font-size: 15px; }
.prov { margin: 0 0 .75rem; color: #57606a; font-size: 12px; overflow-wrap: anywhere; }
.prov code { font-family: ui-monospace, monospace; }
.controls { margin: 0 0 .5rem; display: flex; gap: 1rem; align-items: center; }
#filter { font: inherit; padding: .2rem .5rem; min-width: 18rem; }
#count { color: #57606a; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .45rem; border-bottom: 1px solid #d0d7de; text-align: left;
         vertical-align: top; }
td { white-space: nowrap; }
td.num, th.num { text-align: right; }
thead th { position: sticky; top: 0; background: #f6f8fa; border-bottom: 2px solid #8c959f;
           font-size: 13px; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible, td button:focus-visible { outline: 2px solid #0969da; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; font-size: 9px; }
th[aria-sort="descending"] button::after { content: " \\25BC"; font-size: 9px; }
tbody.row:nth-child(even) tr.main { background: #fafbfc; }
tbody.row tr.main:hover { background: #eef4ff; }
td.best { font-weight: 700; background: #dafbe1; }
td.tied .v { text-decoration: underline; }
.sub { display: block; font-size: 11px; color: #57606a; }
.more { all: unset; cursor: pointer; color: #0969da; padding: 0 .3rem; }
tr.detail td { white-space: normal; background: #f6f8fa; }
dl.details { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr));
             gap: .15rem 1rem; margin: .25rem 0; font-size: 12px; }
dl.details div { display: flex; justify-content: space-between; gap: .5rem; }
dl.details dt { color: #57606a; } dl.details dd { margin: 0; }
.notes { color: #57606a; font-size: 13px; padding-left: 1.2rem; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(30rem, 1fr));
           gap: 1rem; }
figure { margin: 0; } figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { font-size: 12px; color: #57606a; }
"""

_JS = """
(function () {
  "use strict";
  var table = document.getElementById("board");
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var filter = document.getElementById("filter");
  var count = document.getElementById("count");
  var state = { key: table.getAttribute("data-sort"), dir: table.getAttribute("data-dir"), q: "" };
  function groups() { return Array.prototype.slice.call(table.tBodies); }

  function key(group, i, numeric) {
    var v = group.rows[0].cells[i].getAttribute("data-v");
    return numeric ? (v === "" ? NaN : parseFloat(v)) : v;
  }
  function missing(v, numeric) { return numeric ? isNaN(v) : v === ""; }

  function sortBy(name, dir) {
    var i = heads.findIndex(function (h) { return h.getAttribute("data-key") === name; });
    if (i < 0) { return false; }
    var numeric = heads[i].getAttribute("data-type") === "num";
    var rows = groups();
    rows.sort(function (a, b) {  // stable: ties keep the previous order
      var x = key(a, i, numeric), y = key(b, i, numeric);
      var mx = missing(x, numeric), my = missing(y, numeric);
      if (mx || my) { return mx === my ? 0 : (mx ? 1 : -1); }
      var c = numeric ? x - y : x.localeCompare(y, undefined, { numeric: true });
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (r) { table.appendChild(r); });
    heads.forEach(function (h) { if (h.hasAttribute("data-key")) { \
h.setAttribute("aria-sort", "none"); } });
    heads[i].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    state.key = name; state.dir = dir;
    return true;
  }

  function applyFilter(q) {
    state.q = q;
    var words = q.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0, all = groups();
    all.forEach(function (g) {
      var text = g.rows[0].textContent.toLowerCase();
      var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
      g.hidden = !keep; if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + all.length + " rows";
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
    var b = h.querySelector("button");
    if (!b) { return; }
    b.addEventListener("click", function () {
      var name = h.getAttribute("data-key");
      sortBy(name, state.key === name && state.dir === "asc" ? "desc" : "asc");
      writeHash();
    });
  });
  groups().forEach(function (g) {
    var b = g.querySelector("button.more"), d = g.rows[1];
    if (!b || !d) { return; }
    b.addEventListener("click", function () {
      d.hidden = !d.hidden;
      b.setAttribute("aria-expanded", d.hidden ? "false" : "true");
      b.textContent = d.hidden ? "\\u25B8" : "\\u25BE";
    });
  });
  filter.addEventListener("input", function () { applyFilter(filter.value); writeHash(); });
  window.addEventListener("hashchange", readHash);
  readHash();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _num(value: object) -> str:
    if is_missing(value):
        return ""
    try:
        return repr(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


def _details(board: Board, i: int) -> str:
    row = board.table.iloc[i]
    items = []
    for m in board.details:
        if f"{m.name}_mean" not in row:
            continue
        text = fmt_interval(row[f"{m.name}_mean"], row.get(f"{m.name}_lo"),
                            row.get(f"{m.name}_hi"), m)
        items.append((m.header, text, m.tooltip))
    for m in board.columns:
        n, of = row.get(f"changed_{m.name}_n"), row.get(f"changed_{m.name}_of")
        if not is_missing(of) and int(of):
            items.append((f"{m.label}: changed by training", f"{int(n)} of {int(of)} cells",
                          f"{pct(board.level)} interval of trained − untrained excludes 0"))
    items += [("seeds (ok / failed)", f"{fmt_value(row['n_seeds'])} / {fmt_value(row['failed'])}",
               "")]
    for col in ("cell_ids", "code_fingerprint", "git_sha", "params_hash", "dataset_hash",
                "hardware", "device", "wall_seconds"):
        if col in row and not is_missing(row[col]) and str(row[col]):
            items.append((col, fmt_value(row[col]), ""))
    items += _cost_items(row)
    body = "".join(f'<div title="{escape(tip)}"><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>'
                   for k, v, tip in items)
    return f'<dl class="details">{body}</dl>'


# the aggregate's cost columns (pipeline.report.tables.COST_TOTALS) under the registry's words
_COST_ITEMS = (("train_seconds_total", "train_seconds", "total over the row's cells"),
               ("peak_rss_bytes_max", "peak_rss_bytes", "largest of the row's cells"),
               ("cuda_peak_bytes_max", "cuda_peak_bytes", "largest of the row's cells"),
               ("energy_joules_total", "energy_joules", "total over the row's cells"))


def _cost_items(row: Any) -> list[tuple[str, str, str]]:
    """(label, value, tooltip) of what the row's cells cost; energy says "not measured" (and
    the counters read, when it was) rather than leaving a gap."""
    out = []
    for col, base, how in _COST_ITEMS:
        if col not in row:
            continue
        m = lookup(base)
        if is_missing(row[col]) and base != "energy_joules":
            continue
        value = (NOT_MEASURED if is_missing(row[col]) else m.text(row[col]))
        out.append((f"{m.header}, {how.split(' ')[0]}", value, f"{m.tooltip} ({how})"))
    source = row.get("energy_source")
    if isinstance(source, str) and source and source != NOT_MEASURED:
        out.append(("energy counters", source, "what the energy total adds up"))
    return out


def _row(board: Board, i: int) -> str:
    row = board.table.iloc[i]
    tds = [f'<td class="num" data-v="{_num(row["rank"])}">{escape(board.rank_text(i))}</td>']
    if board.tier_axis:
        tds.append(f'<td class="num" data-v="{_num(row.get("tier"))}">'
                   f"{escape(board.tier_text(i))}</td>")
    for a in board.axes:
        cls = "" if board.is_text(a) else ' class="num"'
        tds.append(f'<td{cls} data-v="'
                   f'{escape(_num(row[a]) if not board.is_text(a) else str(row[a]))}">'
                   f"{escape(fmt_value(row[a]))}</td>")
    for m in board.columns:
        e = entry(row, m)
        cls = " ".join(["num", *(["best"] if e.best else []), *(["tied"] if e.tied else [])])
        sub = " ".join(p for p in (f"± {e.half}" if e.half else "", e.control) if p)
        sig = "†" if e.sig else ""
        tds.append(f'<td class="{cls}" data-v="{_num(e.sort)}"><span class="v">'
                   f"{escape(e.value)}{sig}</span>"
                   + (f'<span class="sub">{escape(sub)}</span>' if sub else "") + "</td>")
    tds.append('<td><button type="button" class="more" aria-expanded="false" '
               'title="details: every metric, the controls, the provenance">▸</button></td>')
    span = len(board.axes) + len(board.columns) + 2 + bool(board.tier_axis)
    return (f'<tbody class="row"><tr class="main">{"".join(tds)}</tr>\n'
            f'<tr class="detail" hidden><td colspan="{span}">{_details(board, i)}</td></tr>'
            "</tbody>")


def _head(board: Board) -> str:
    cells = ['<th class="num" data-key="rank" data-type="num" aria-sort="none" scope="col" '
             'title="rank by the primary metric; ‡: failed or stale cells"><button '
             'type="button">#</button></th>']
    if board.tier_axis:
        cells.append(f'<th class="num" data-key="tier" data-type="num" aria-sort="none" '
                     f'scope="col" title="tier of the row\'s {escape(board.tier_axis)} across all '
                     f'settings: values the tests cannot separate share a tier"><button '
                     f'type="button">Tier</button></th>')
    for a in board.axes:
        kind = "text" if board.is_text(a) else "num"
        cells.append(f'<th class="{"num" if kind == "num" else ""}" data-key="{escape(a)}" '
                     f'data-type="{kind}" aria-sort="none" scope="col" title="grid axis {a}">'
                     f'<button type="button">{escape(axis_header(a))}</button></th>')
    for m in board.columns:
        cells.append(f'<th class="num" data-key="{escape(m.name)}" data-type="num" '
                     f'aria-sort="none" scope="col" title="{escape(m.tooltip)}"><button '
                     f'type="button">{escape(m.header)}</button></th>')
    cells.append('<th scope="col"></th>')
    return "<tr>" + "".join(cells) + "</tr>"


def _tables(board: Board) -> str:
    out = []
    for title, header, rows in board.tables:
        head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
        words = text_columns(rows)
        body = "".join("<tr>" + "".join(
            (f"<td>{escape(c)}</td>" if words[k] else f'<td class="num">{escape(c)}</td>')
            for k, c in enumerate(r)) + "</tr>" for r in rows)
        out.append(f'<h2>{escape(title)}</h2>\n<table class="across"><thead><tr>{head}</tr>'
                   f"</thead><tbody>{body}</tbody></table>")
    return "\n".join(out)


def _figures(figures: Sequence[tuple[str, bytes]]) -> str:
    if not figures:
        return ""
    items = "".join(
        f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}"><figcaption>{escape(caption)}</figcaption></figure>'
        for caption, png in figures)
    return f'<h2>Figures</h2>\n<section class="figures">{items}</section>'


def to_html(board: Board, figures: Sequence[tuple[str, bytes]] = ()) -> str:
    """The whole page as a string; ``figures``: (caption, PNG bytes) pairs, embedded."""
    primary = board.primary
    sort = primary.name if primary is not None else "rank"
    direction = "desc" if primary is not None and primary.higher else "asc"
    rows = "\n".join(_row(board, i) for i in range(len(board.table)))
    head = _head(board).replace(f'data-key="{sort}" data-type="num" aria-sort="none"',
                                f'data-key="{sort}" data-type="num" aria-sort='
                                f'"{"descending" if direction == "desc" else "ascending"}"', 1)
    notes = "".join(f"<li>{escape(n)}</li>" for n in board.notes)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(board.title)}</title>
<style>{_CSS}</style>
</head>
<body>
<header>
<h1>{escape(board.title)}</h1>
<p class="setting">{escape(board.caption)}</p>
<p class="prov">Provenance: <code>{escape(board.provenance_text)}</code></p>
</header>
{_tables(board)}
<h2>Settings</h2>
<p class="controls"><label>Filter <input id="filter" type="search"
 placeholder="words in any column" autocomplete="off"></label><span id="count"></span></p>
<table id="board" data-sort="{escape(sort)}" data-dir="{direction}"><thead>{head}</thead>
{rows}
</table>
<ul class="notes">{notes}</ul>
{_figures(figures)}
<script>{_JS}</script>
</body>
</html>
"""

