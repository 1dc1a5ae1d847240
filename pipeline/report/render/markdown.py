"""The one Markdown writer: GitHub-flavoured pipe tables, and the leaderboard built on it.

A leaderboard reads as a README section or a PR comment: a title, the setting in one line, one
table per section (at most ``MAX_COLUMNS`` columns), then the notes and the provenance. Best
values are **bold**, values not significantly different from the best *italic*.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pipeline.metrics import is_metric, lookup
from pipeline.report.formatting import (
    ROW_MARK,
    Entry,
    axis_header,
    fmt_interval,
    fmt_value,
    text_columns,
)
from pipeline.report.grid.board import Board

MAX_COLUMNS = 12
# What a cell's own ± is over (pipeline.stats.intervals): never the variation between trainings
CELL_INTERVALS = {
    "cv": "CV — percentile bootstrap over held-out rows (the measurement of a fixed encoder)",
    "ad_mean": "AD Avg, DP Avg — a spread over the d coordinates (t-interval), not a confidence "
               "interval: coordinates are neither sampled nor independent",
    "ad_pass_frac": "pass % — Wilson over the d coordinates, likewise a spread",
}


def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          align: Sequence[str] | None = None) -> str:
    """A pipe table, columns padded to their width; align: 'l' or 'r' per column (default l)."""
    esc = [[str(c).replace("|", "\\|") for c in r] for r in [list(header), *rows]]
    align = list(align) if align is not None else ["l"] * len(header)
    widths = [max(3, *(len(r[i]) for r in esc)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if a == "r" else c.ljust(w)
                                 for c, w, a in zip(cells, widths, align, strict=True)) + " |"

    rule = "|" + "|".join((":" + "-" * (w + 1) if a == "l" else "-" * (w + 1) + ":")
                          for w, a in zip(widths, align, strict=True)) + "|"
    return "\n".join([line(esc[0]), rule, *(line(r) for r in esc[1:])]) + "\n"


def _cell(e: Entry) -> str:
    text = e.text + (f" ({e.control})" if e.control else "")
    if e.best:
        return f"**{text}**"
    return f"*{text}*" if e.tied else text


def board_table(board: Board, rows: Sequence[int], max_columns: int = MAX_COLUMNS) -> str:
    """The rows ``rows`` of ``board`` as one pipe table: #, the varying axes, the headline
    metrics (the trailing ones dropped beyond ``max_columns``)."""
    tier = ["Tier"] if board.tier_axis else []
    metrics = list(board.columns)[: max(0, max_columns - 1 - len(tier) - len(board.axes))]
    header = ["#", *tier, *(axis_header(a) for a in board.axes), *(m.header for m in metrics)]
    body = []
    for i in rows:
        row = board.table.iloc[i]
        body.append([board.rank_text(i), *([board.tier_text(i)] if tier else []),
                     *(fmt_value(row[a]) for a in board.axes),
                     *(_cell(board.entry(i, m)) for m in metrics)])
    return table(header, body, ["r", *("r" for _ in tier),
                                *("l" if board.is_text(a) else "r" for a in board.axes),
                                *("r" for _ in metrics)])


def to_markdown(board: Board, max_columns: int = MAX_COLUMNS, heading: str = "##") -> str:
    """The whole leaderboard: title, setting, one table per section, notes, provenance."""
    parts = [f"{heading} {board.title}", "", board.caption, ""]
    for title, header, rows in board.tables:
        align = text_columns(rows) or [True]
        parts += [f"**{title}**", "", table(header, rows, ["l" if align[k] else "r"
                                                           for k in range(len(header))])]
    for section in board.sections:
        if section.title and len(board.sections) > 1:
            parts += [f"**{section.title}**", ""]
        parts.append(board_table(board, section.rows, max_columns))
    shown = min(len(board.columns),
                max(0, max_columns - 1 - bool(board.tier_axis) - len(board.axes)))
    notes = list(board.notes)
    if shown < len(board.columns):
        rest = ", ".join(m.label for m in board.columns[shown:])
        notes.append(f"Not shown here (at most {max_columns} columns): {rest}; see "
                     "leaderboard.html and leaderboard.csv.")
    parts += [f"- {n}" for n in notes]
    parts.append(f"- Provenance: {board.provenance_text}.")
    return "\n".join(parts) + "\n"


def cells_table(cells: pd.DataFrame, columns: Sequence[str]) -> str:
    """Per-cell rows as a pipe table: ``columns`` that the table has, metrics as the registry
    formats them; then the failed cells and their reasons."""
    cols = [c for c in columns if c in cells.columns]
    metrics = {c: lookup(c) for c in cols if is_metric(c)}
    header = [metrics[c].header if c in metrics else c for c in cols]
    body = [[fmt_interval(r[c], metric=metrics[c]) if c in metrics else fmt_value(r[c])
             for c in cols] for _, r in cells.iterrows()]
    align = ["r" if c in metrics or pd.api.types.is_numeric_dtype(cells[c]) else "l" for c in cols]
    text = table(header, body, align)
    units = [u for c, u in CELL_INTERVALS.items() if c in cols]
    if units:
        text += "\nIntervals of one cell: " + "; ".join(units) + ".\n"
    if "status" in cells:
        failed = cells[cells.status != "ok"]
        notes = [f"- {ROW_MARK} `{r.cell_id}`: {_first_line(r.reason)}"
                 for r in failed.itertuples()]
        if notes:
            text += "\nFailed cells:\n\n" + "\n".join(notes) + "\n"
    return text


def _first_line(reason: object) -> str:
    text = "" if reason is None or (isinstance(reason, float) and reason != reason) else str(reason)
    return text.splitlines()[0] if text.strip() else "failed"
