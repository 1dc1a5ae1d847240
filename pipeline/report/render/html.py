"""HTML leaderboard: one self-contained page (inline CSS, vanilla JS, figures as data: URIs).

The header says the setting, the level and the provenance; the table has one row per setting,
ranked by the primary metric, best values highlighted; each header's tooltip is the registry's
description. Rows are plain HTML, so the page reads without JavaScript (every row shown). With it:
clicking a header sorts by that column (numeric order, missing values last; a second click
reverses), a filter box keeps the rows containing every typed word, the table shows one page of
``rows_per_page`` rows at a time (sort and filter apply to every row, then the page is cut; prev
and next step through the pages), a row's button shows its details (every metric of
``report.metrics``, the controls, the provenance), and the state lives in the URL hash
``#sort=<column>&dir=asc|desc&filter=<words>&page=<n>`` (read on load, so a view can be linked
to). Each setting is one ``<tbody>`` (its row and its details), so sorting keeps them together.
The details are written once as a JSON block and built into a row's ``<tr class="detail">`` when
it is first opened (``lazy_details``): they are most of a large grid's bytes otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.metrics import NOT_MEASURED, lookup
from pipeline.report.formatting import (
    axis_header,
    entry,
    fmt_interval,
    fmt_value,
    is_missing,
    pct,
    text_columns,
)
from pipeline.report.grid.board import Board
from pipeline.report.render.page import escape, figure, html_page

# the leaderboard's own rules, after the shell's (pipeline.report.render.page.CSS)
_CSS = """
.setting { margin: 0 0 .25rem; font-size: 15px; }
.prov { margin: 0 0 .75rem; color: #57606a; font-size: 12px; overflow-wrap: anywhere; }
.controls { margin: 0 0 .5rem; display: flex; gap: 1rem; align-items: center; }
.pager { display: flex; gap: .5rem; align-items: center; } .pager[hidden] { display: none; }
.pager button { font: inherit; padding: .1rem .5rem; }
#filter { font: inherit; padding: .2rem .5rem; min-width: 18rem; }
#count { color: #57606a; }
td { white-space: nowrap; }
thead th { position: sticky; top: 0; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible, td button:focus-visible { outline: 2px solid #0969da; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; font-size: 9px; }
th[aria-sort="descending"] button::after { content: " \\25BC"; font-size: 9px; }
tbody.row.alt tr.main { background: #fafbfc; }
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
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(30rem, 1fr));
           gap: 1rem; }
.figures figure { margin: 0; }
"""

_JS = """
(function () {
  "use strict";
  var table = document.getElementById("board");
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var filter = document.getElementById("filter");
  var count = document.getElementById("count");
  var pager = document.getElementById("pager");
  var size = parseInt(table.getAttribute("data-page-size") || "", 10) || Infinity;
  var state = { key: table.getAttribute("data-sort"), dir: table.getAttribute("data-dir"), q: "",
                page: 1 };
  var texts = new Map(), keep = new Map(), details = null;
  function groups() { return Array.prototype.slice.call(table.tBodies); }

  function key(group, i, numeric) {
    var v = group.rows[0].cells[i].getAttribute("data-v");
    return numeric ? (v === "" ? NaN : parseFloat(v)) : v;
  }
  function missing(v, numeric) { return numeric ? isNaN(v) : v === ""; }
  function text(g) {  // the row's words, read once (sorting does not change them)
    if (!texts.has(g)) { texts.set(g, g.rows[0].textContent.toLowerCase()); }
    return texts.get(g);
  }

  function sortBy(name, dir) {
    var i = heads.findIndex(function (h) { return h.getAttribute("data-key") === name; });
    if (i < 0) { return false; }
    var numeric = heads[i].getAttribute("data-type") === "num";
    var rows = groups().map(function (g, j) { return { g: g, j: j, v: key(g, i, numeric) }; });
    rows.sort(function (a, b) {  // ties keep the previous order
      var mx = missing(a.v, numeric), my = missing(b.v, numeric), c;
      if (mx || my) { c = mx === my ? 0 : (mx ? 1 : -1); return c || a.j - b.j; }
      c = numeric ? a.v - b.v : a.v.localeCompare(b.v, undefined, { numeric: true });
      return (dir === "desc" ? -c : c) || a.j - b.j;
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r.g); });
    table.appendChild(frag);
    heads.forEach(function (h) { if (h.hasAttribute("data-key")) { \
h.setAttribute("aria-sort", "none"); } });
    heads[i].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    state.key = name; state.dir = dir;
    return true;
  }

  function applyFilter(q) {
    state.q = q;
    var words = q.toLowerCase().split(/\\s+/).filter(Boolean);
    groups().forEach(function (g) {
      keep.set(g, words.every(function (w) { return text(g).indexOf(w) >= 0; }));
    });
  }

  function pages(n) { return Math.max(1, Math.ceil(n / size)); }

  function render() {  // the kept rows in table order, then the current page of them
    var all = groups(), kept = all.filter(function (g) { return keep.get(g) !== false; });
    var last = pages(kept.length);
    state.page = Math.min(Math.max(1, state.page), last);
    var from = (state.page - 1) * size, to = Math.min(from + size, kept.length), j = 0;
    var shown = new Set(kept.slice(from, to));
    all.forEach(function (g) {
      var hide = !shown.has(g);
      if (g.hidden !== hide) { g.hidden = hide; }
      if (!hide) { g.classList.toggle("alt", j % 2 === 1); j += 1; }
    });
    count.textContent = (to - from) + " of " + all.length + " rows" +
      (last > 1 && kept.length < all.length ? " (" + kept.length + " match)" : "");
    pager.hidden = last <= 1;
    document.getElementById("page").textContent = "page " + state.page + " of " + last;
    document.getElementById("prev").disabled = state.page <= 1;
    document.getElementById("next").disabled = state.page >= last;
  }

  function writeHash() {
    var p = new URLSearchParams();
    if (state.key) { p.set("sort", state.key); p.set("dir", state.dir); }
    if (state.q) { p.set("filter", state.q); }
    if (state.page > 1) { p.set("page", String(state.page)); }
    try { history.replaceState(null, "", "#" + p.toString()); } catch (e) { /* file: quirks */ }
  }

  function readHash() {
    var p = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (p.get("sort")) { sortBy(p.get("sort"), p.get("dir") === "desc" ? "desc" : "asc"); }
    filter.value = p.get("filter") || "";
    applyFilter(filter.value);
    state.page = parseInt(p.get("page") || "1", 10) || 1;
    render();
  }

  function fill(g, d) {  // a lazily written row's details, from the JSON block
    if (d.cells[0].firstChild || !g.hasAttribute("data-i")) { return; }
    if (details === null) {
      details = JSON.parse(document.getElementById("details").textContent);
    }
    var dl = document.createElement("dl");
    dl.className = "details";
    details.rows[parseInt(g.getAttribute("data-i"), 10)].forEach(function (item) {
      var label = details.labels[item[0]], div = document.createElement("div");
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      div.title = label[1]; dt.textContent = label[0]; dd.textContent = item[1];
      div.appendChild(dt); div.appendChild(dd); dl.appendChild(div);
    });
    d.cells[0].appendChild(dl);
  }

  heads.forEach(function (h) {
    var b = h.querySelector("button");
    if (!b) { return; }
    b.addEventListener("click", function () {
      var name = h.getAttribute("data-key");
      sortBy(name, state.key === name && state.dir === "asc" ? "desc" : "asc");
      state.page = 1; render(); writeHash();
    });
  });
  table.addEventListener("click", function (ev) {  // one listener for every row's button
    var b = ev.target.closest ? ev.target.closest("button.more") : null;
    if (!b || !table.contains(b)) { return; }
    var g = b.closest("tbody"), d = g.rows[1];
    if (!d) { return; }
    if (d.hidden) { fill(g, d); }
    d.hidden = !d.hidden;
    b.setAttribute("aria-expanded", d.hidden ? "false" : "true");
    b.textContent = d.hidden ? "\\u25B8" : "\\u25BE";
  });
  function step(by) { state.page += by; render(); writeHash(); }
  document.getElementById("prev").addEventListener("click", function () { step(-1); });
  document.getElementById("next").addEventListener("click", function () { step(1); });
  filter.addEventListener("input", function () {
    applyFilter(filter.value); state.page = 1; render(); writeHash();
  });
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


def _detail_items(board: Board, row: Any) -> list[tuple[str, str, str]]:
    """(label, value, tooltip) of every detail of one row of ``board.table``."""
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
    return items + _cost_items(row)


def _details(items: Sequence[tuple[str, str, str]]) -> str:
    body = "".join(f'<div title="{escape(tip)}"><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>'
                   for k, v, tip in items)
    return f'<dl class="details">{body}</dl>'


def _details_json(rows: Sequence[Sequence[tuple[str, str, str]]]) -> str:
    """Every row's details as one JSON object for the page's script: ``labels``, the distinct
    (label, tooltip) pairs, and ``rows``, per row of the board its [label index, value] pairs;
    ``<`` is escaped so that the block cannot close its ``<script>`` element."""
    labels: dict[tuple[str, str], int] = {}
    out = [[[labels.setdefault((k, tip), len(labels)), v] for k, v, tip in items]
           for items in rows]
    text = json.dumps({"labels": [list(k) for k in labels], "rows": out}, ensure_ascii=False,
                      separators=(",", ":"))
    return text.replace("<", "\\u003c")


# the aggregate's cost columns (pipeline.report.grid.tables.COST_TOTALS) under the registry's words
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


def _row(board: Board, i: int, row: Any, text_axes: dict[str, bool],
         items: Sequence[tuple[str, str, str]] | None, hidden: bool) -> str:
    """Row ``i`` (``row``: ``board.table.iloc[i]``) as one ``<tbody>``; ``items``: its details
    written into the page, None: an empty details row that the script fills from the JSON
    block; ``hidden``: the row is past the first page (shown anyway without JavaScript)."""
    tds = [f'<td class="num" data-v="{_num(row["rank"])}">{escape(board.rank_text(i))}</td>']
    if board.tier_axis:
        tds.append(f'<td class="num" data-v="{_num(row.get("tier"))}">'
                   f"{escape(board.tier_text(i))}</td>")
    for a in board.axes:
        cls = "" if text_axes[a] else ' class="num"'
        tds.append(f'<td{cls} data-v="'
                   f'{escape(_num(row[a]) if not text_axes[a] else str(row[a]))}">'
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
    details = _details(items) if items is not None else ""
    attrs = (' class="row alt"' if i % 2 else ' class="row"') + f' data-i="{i}"' \
        + (" hidden" if hidden else "")
    return (f'<tbody{attrs}><tr class="main">{"".join(tds)}</tr>\n'
            f'<tr class="detail" hidden><td colspan="{span}">{details}</td></tr>'
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
    items = "".join(figure(caption, png) for caption, png in figures)
    return f'<h2>Figures</h2>\n<section class="figures">{items}</section>'


# without JavaScript every row shows (the rows past the first page are hidden in the HTML)
_NOSCRIPT = ("<noscript><style>#board tbody.row[hidden] { display: table-row-group; }</style>"
             "</noscript>")

ROWS_PER_PAGE = 100  # the leaderboard page's table: rows shown at a time


def to_html(board: Board, figures: Sequence[tuple[str, bytes]] = (),
            rows_per_page: int | None = ROWS_PER_PAGE, lazy_details: bool = True) -> str:
    """The whole page as a string; ``figures``: (caption, PNG bytes) pairs, embedded.

    rows_per_page: settings shown at a time (None: every row on one page); lazy_details: the
    rows' details as one JSON block, built into a row when it is opened (False: written into
    every row as HTML, which is most of the page's bytes on a large grid)."""
    if rows_per_page is not None and (isinstance(rows_per_page, bool)
                                      or not isinstance(rows_per_page, int) or rows_per_page < 1):
        raise ValueError(f"rows_per_page = {rows_per_page!r}: must be an integer >= 1, or None "
                         "for every row on one page")
    primary = board.primary
    sort = primary.name if primary is not None else "rank"
    direction = "desc" if primary is not None and primary.higher else "asc"
    text_axes = {a: board.is_text(a) for a in board.axes}
    records = [board.table.iloc[i] for i in range(len(board.table))]
    items = [_detail_items(board, row) for row in records]
    rows = "\n".join(
        _row(board, i, row, text_axes, None if lazy_details else items[i],
             rows_per_page is not None and i >= rows_per_page)
        for i, row in enumerate(records))
    blob = (f'<script type="application/json" id="details">{_details_json(items)}</script>\n'
            if lazy_details else "")
    page_size = f' data-page-size="{rows_per_page}"' if rows_per_page is not None else ""
    head = _head(board).replace(f'data-key="{sort}" data-type="num" aria-sort="none"',
                                f'data-key="{sort}" data-type="num" aria-sort='
                                f'"{"descending" if direction == "desc" else "ascending"}"', 1)
    notes = "".join(f"<li>{escape(n)}</li>" for n in board.notes)
    body = f"""<header>
<h1>{escape(board.title)}</h1>
<p class="setting">{escape(board.caption)}</p>
<p class="prov">Provenance: <code>{escape(board.provenance_text)}</code></p>
</header>
{_tables(board)}
<h2>Settings</h2>
<p class="controls"><label>Filter <input id="filter" type="search"
 placeholder="words in any column" autocomplete="off"></label><span id="count"></span>
<span class="pager" id="pager" hidden><button type="button" id="prev">‹ prev</button>
<span id="page"></span><button type="button" id="next">next ›</button></span></p>
<table id="board" data-sort="{escape(sort)}" data-dir="{direction}"{page_size}><thead>{head}</thead>
{rows}
</table>
{blob}
<ul class="notes">{notes}</ul>
{_figures(figures)}
<script>{_JS}</script>"""
    return html_page(board.title, body, _CSS, head=_NOSCRIPT)
