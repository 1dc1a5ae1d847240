"""The publishable leaderboard as one value: rows, headline columns, marks, caption, notes.

Rows are the settings (``report.group_by`` combinations, seeds pooled) ranked by
``report.primary``; the shown axes are those that vary; the constant ones go to the caption, the
run's provenance to one line. Columns are the headline metrics ``report.columns``: mean ± the
``report.level`` t-interval over seeds, the best of each ranked column marked and the values not
significantly different from it (Welch over seeds), † where a loss differs from
``report.baseline`` at the same setting, and for the statistics measured on the untrained encoder
too, the change Δ against it with ° where training changed it in none of the row's cells.
Markdown, LaTeX and HTML all write a :class:`Board`; none decides anything a board says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.config import ReportConfig
from pipeline.metrics import Metric, is_metric, lookup
from pipeline.report.formatting import (
    ROW_MARK,
    SIG,
    UNCHANGED,
    Entry,
    axis_text,
    entry,
    fmt_value,
    pct,
    seeds_text,
)
from pipeline.report.grid.compare import mark_significant
from pipeline.report.grid.selection import Selection, choose, display
from pipeline.report.grid.tables import (
    PROVENANCE,
    aggregate,
    axes_in,
    group_rows,
    metrics_in,
    ok_mask,
    plain,
    rank,
    tied_with_best,
    varying,
)

RUN_PROVENANCE = (("code", "code_fingerprint"), ("git", "git_sha"), ("params", "params_hash"),
                  ("data", "dataset_hash"), ("hardware", "hardware"), ("runs", "source"))


@dataclass(frozen=True)
class Section:
    """A titled selection of a board's rows (positions in ``Board.table``)."""

    title: str
    rows: tuple[int, ...]


@dataclass(frozen=True)
class Board:
    """One leaderboard, ready for any writer.

    table: one row per setting, best first (an :func:`~pipeline.report.grid.tables.aggregate` table
    plus ``rank``, ``<m>_best``, ``<m>_tied``, ``<m>_sig``); axes: the group axes that vary (the
    row keys); columns: the headline metrics; details: the metrics of the per-row details;
    sections: the rows the Markdown and LaTeX tables show.
    """

    title: str
    table: pd.DataFrame
    axes: tuple[str, ...]
    columns: tuple[Metric, ...]
    primary: Metric | None
    setting: str
    seeds: str
    provenance: tuple[tuple[str, str], ...]
    level: float
    notes: tuple[str, ...]
    sections: tuple[Section, ...]
    details: tuple[Metric, ...]
    # groups of report.compare values the tests cannot separate (pipeline.report.grid.ranks): the
    # table's ``tier`` column; and tables shown before the settings: (title, header, rows)
    tier_axis: str | None = None
    # the best setting of each variant (pipeline.report.grid.selection), chosen apart from reporting
    selection: Selection | None = None
    tables: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]], ...] = ()

    @property
    def caption(self) -> str:
        ranked = (f" Ranked by {self.primary.label} ({self.primary.better} is better)."
                  if self.primary is not None else "")
        return f"{self.setting}; {self.seeds}.{ranked}"

    @property
    def provenance_text(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.provenance) or "unknown"

    def entry(self, i: int, metric: Metric) -> Entry:
        return entry(self.table.iloc[i], metric)

    def rank_text(self, i: int) -> str:
        """The rank of row ``i``, with ``‡`` when some of its cells failed or are stale."""
        row = self.table.iloc[i]
        mark = ROW_MARK if row.get("failed", 0) or row.get("stale", 0) else ""
        return fmt_value(row["rank"]) + mark

    def tier_text(self, i: int) -> str:
        """The tier of row ``i``'s ``tier_axis`` value ('–' where it has none)."""
        value = self.table.iloc[i].get("tier")
        return fmt_value(value) if value is not None else "–"

    def is_text(self, column: str) -> bool:
        return not pd.api.types.is_numeric_dtype(self.table[column])


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _numeric(cells: pd.DataFrame, names: Sequence[str]) -> list[str]:
    have = set(metrics_in(cells))
    return [m for m in names if m in have and cells[m].notna().any()]


def _primary(name: str, headline: Sequence[Metric], cells: pd.DataFrame) -> Metric | None:
    if name in cells and cells[name].notna().any():
        return lookup(name)
    return next((m for m in headline if m.ranked), None)


def _marks(table: pd.DataFrame, cells: pd.DataFrame, group_by: list[str],
           headline: Sequence[Metric], alpha: float) -> pd.DataFrame:
    ok = ok_mask(cells)
    good = [r[ok[r]] for r in group_rows(cells, group_by)[1]]
    for m in (m for m in headline if m.ranked):
        column = cells[m.name].to_numpy(float)
        values = [x[~np.isnan(x)] for x in (column[g] for g in good)]
        best, tied = tied_with_best(values, table[f"{m.name}_mean"].to_numpy(float), m, alpha)
        table[f"{m.name}_best"], table[f"{m.name}_tied"] = best, tied
    return table


def _sorted(table: pd.DataFrame, primary: Metric | None, keys: list[str]) -> pd.DataFrame:
    if primary is None:
        table = table.sort_values(keys) if keys else table
        table.insert(0, "rank", range(1, len(table) + 1))
        return table.reset_index(drop=True)
    table.insert(0, "rank", rank(table[f"{primary.name}_mean"], primary).astype("Int64"))
    return table.sort_values(["rank", *keys], na_position="last").reset_index(drop=True)


def _provenance(cells: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    out = []
    for label, col in RUN_PROVENANCE:
        values = ([str(v) for v in dict.fromkeys(cells[col].dropna()) if str(v)]
                  if col in cells else [])
        if col == "source" and values:  # merged runs: every table named once
            values = list(dict.fromkeys(p for v in values for p in v.split(";")))
            values = [", ".join(values)] if len(values) <= 4 else values
        if values:
            out.append((label, values[0] if len(values) == 1 else
                        f"{len(values)} values (per cell in cells.csv)"))
    return tuple(out)


def _variant(axes: Sequence[str]) -> str | None:
    """The axis whose best settings the board shows first: the loss, else the first varying."""
    return "loss" if "loss" in axes else axes[0] if axes else None


def _sections(table: pd.DataFrame, axes: Sequence[str], primary: Metric | None,
              top: int, chosen: Selection | None) -> tuple[Section, ...]:
    n = len(table)
    if n <= top:
        return (Section(f"All {n} setting" + ("s" if n != 1 else ""), tuple(range(n))),)
    variant = _variant(axes)
    out = []
    if variant is not None:
        first = (chosen.rows if chosen is not None and chosen.choices else
                 tuple(int(i) for i in table.drop_duplicates(variant, keep="first").index))
        out.append(Section(f"Best setting of each {variant}", first))
    by = f" by {primary.label}" if primary is not None else ""
    out.append(Section(f"Top {top} of {n} settings{by}", tuple(range(top))))
    return tuple(out)


def _notes(board: dict[str, Any], cells: pd.DataFrame, pooled: list[str],
           compared: str | None, alpha: float) -> list[str]:
    table, level, headline = board["table"], board["level"], board["columns"]
    seeds = int(table.n_seeds.max()) if len(table) else 0
    notes = [f"Values: mean ± half-width of the {pct(level)} Student-t interval over seeds; "
             "for a % metric, a fraction, the t-interval of its logit mapped back, which stays "
             "in [0, 100] and is shown as [low, high] where it is not symmetric."
             if seeds > 1 else "Values: one seed, so no intervals, ties or † can be told."]
    if any(m.ranked for m in headline):
        notes.append(f"↑/↓: higher/lower is better. Bold: the best of the column among all "
                     f"{len(table)} settings"
                     + (f"; underlined (italic in Markdown): not significantly different "
                        f"from it (Welch's t-test over seeds, p ≥ {alpha:g})" if seeds > 1
                        else "") + ". Unmarked columns are properties, not scores.")
    if compared and seeds > 1:
        notes.append(f"{SIG}: differs from {compared} at the same setting (paired t-test over "
                     f"seeds, p < {alpha:g}; no multiple-comparison correction).")
    if any(f"delta_{m.name}_mean" in table for m in headline):
        notes.append(f"Δ: trained minus the same encoder untrained (epoch 0, same seed and "
                     f"data), mean over seeds; {UNCHANGED}: the {pct(level)} t-interval over "
                     "seeds of the difference covers 0 (training did not move it)"
                     + ("." if seeds > 1 else "; with one seed that is unresolved (too few "
                        f"seeds), so no {UNCHANGED} is printed (the cells' own intervals are "
                        "over held-out rows or coordinates, not over trainings)."))
    for axis in pooled:
        values = ", ".join(fmt_value(v) for v in sorted(cells[axis].dropna().unique(), key=str))
        notes.append(f"Pooled over {axis} ∈ {{{values}}} (not in report.group_by).")
    failed = int(table.failed.sum()) if "failed" in table else 0
    if failed:
        notes.append(f"{ROW_MARK}: {failed} cell(s) failed; they are left out of the means "
                     "(reasons in cells.csv): " + _failures(cells, board["axes"]) + ".")
    if "stale" in cells and cells.stale.fillna(False).astype(bool).any():
        n = int(cells.stale.fillna(False).astype(bool).sum())
        notes.append(f"{ROW_MARK}: {n} cell(s) are stale, trained by other code "
                     "(train.on_code_change: keep); see the stale column of cells.csv.")
    if "training_id" in cells and cells.training_id.nunique() < len(cells):
        shared = cells[cells.training_id.duplicated(keep=False)]
        notes.append(f"{len(shared)} cells share {shared.training_id.nunique()} trainings: their "
                     "loss reads no k (nor train.negatives), so its rows at different k are one "
                     "trained encoder evaluated at each k (training_id in cells.csv), not "
                     "independent replicates.")
    if "reproduced" in cells and cells.reproduced.notna().any():
        checked = cells.reproduced.dropna().astype(bool)
        notes.append(f"cbench verify retrained {len(checked)} cell(s) from their records: "
                     f"{int(checked.sum())} reproduced within its stated tolerances"
                     + ("" if checked.all() else ", " + str(int((~checked).sum())) + " did not")
                     + " (reproduced column of cells.csv).")
    chosen = board.get("selection")
    if any(s.title.startswith("Best setting of each") for s in board["sections"]):
        primary = board["primary"].label if board["primary"] is not None else "the primary metric"
        if chosen is not None and chosen.split:
            notes.append(f"Best setting of each {chosen.axis}: chosen on {primary} over one "
                         "fixed half of the held-out anchors (mean over seeds) and reported on "
                         "the other half, in the table of the chosen settings, with a "
                         "hierarchical bootstrap interval over seeds, then anchors; the rows' "
                         "own columns are over all held-out anchors, the selection half "
                         "included. The ranks and tiers across settings select nothing.")
        else:
            notes.append(f"Best setting of each variant: chosen on the same held-out {primary} "
                         "it shows, so optimistic, more so for a variant with more settings "
                         f"({primary} has no selection half: only the retrieval recalls do). "
                         "The ranks and tiers across settings select nothing.")
    if sum(len(s.rows) for s in board["sections"]) < len(table) or len(board["sections"]) > 1:
        notes.append("Every setting in leaderboard.html and leaderboard_full.csv, every cell "
                     "in cells.csv.")
    return notes


def _failures(cells: pd.DataFrame, axes: Sequence[str], most: int = 5) -> str:
    """The first ``most`` failed cells: id, the varying axes' values, the reason's first line."""
    bad = cells[cells.status != "ok"] if "status" in cells else cells[:0]
    parts = []
    for _, r in bad.head(most).iterrows():
        where = ", ".join(axis_text(a, r[a]) for a in (*axes, "seed") if a in r)
        reason = str(r.get("reason") or "failed").strip().splitlines() or ["failed"]
        text = reason[0] if len(reason[0]) <= 90 else reason[0][:89] + "…"
        parts.append(f"{r.get('cell_id', '?')} ({where}): {text}")
    more = f"; and {len(bad) - most} more" if len(bad) > most else ""
    return "; ".join(parts) + more


def make_board(cells: pd.DataFrame, cfg: ReportConfig, data_name: str = "",
               title: str = "contrastive-bench leaderboard",
               comparison: pd.DataFrame | None = None,
               split_by: Sequence[str] = (),
               tiers: tuple[str, dict[str, int], list[str]] | None = None) -> Board:
    """The leaderboard of the per-cell table ``cells`` as ``cfg`` (``report:``) asks.

    comparison: :func:`~pipeline.report.grid.compare.compare_to_baseline` of these cells
    (None: no †);
    split_by: extra columns that tell settings apart (e.g. ``code_fingerprint`` of merged runs);
    tiers: (axis, value → tier, the notes that say what the tiers are) from
    :mod:`pipeline.report.grid.ranks`; the table gets a ``tier`` column.
    """
    group_by = _unique([a for a in cfg.group_by if a in cells]
                       + [c for c in split_by if c in cells])
    headline = [lookup(m) for m in _numeric(cells, cfg.columns)]
    details = [lookup(m) for m in _numeric(cells, cfg.metrics)]
    deltas = [f"delta_{m.name}" for m in headline if is_metric(f"delta_{m.name}")]
    metrics = _unique([m.name for m in headline] + [m.name for m in details]
                      + _numeric(cells, deltas))
    table = aggregate(cells, group_by, metrics, cfg.level)
    if "stale" in cells:
        stale = cells.stale.fillna(False).astype(bool).to_numpy()
        table["stale"] = [int(stale[r].sum()) for r in group_rows(cells, group_by)[1]]
    table = _marks(table, cells, group_by, headline, cfg.alpha)
    compared = None
    if comparison is not None and len(comparison) and "loss" in group_by:
        try:
            table = mark_significant(table, comparison, "loss")
            compared = str(comparison.baseline.iloc[0])
        except ValueError:  # the comparison's settings are not rows of this board
            compared = None
    axes = varying(cells, group_by)
    primary = _primary(cfg.primary, headline, cells)
    table = _sorted(table, primary, axes)
    tier_axis = None
    if tiers is not None and tiers[0] in table and tiers[1]:
        tier_axis = tiers[0]
        table.insert(1, "tier", [tiers[1].get(str(v)) for v in table[tier_axis]])
    constant = [a for a in axes_in(cells) if a != "seed" and a not in axes
                and cells[a].nunique(dropna=False) == 1]
    setting = ", ".join(([f"{data_name} data"] if data_name else [])
                        + [axis_text(a, cells[a].iloc[0]) for a in constant])
    good = table.n_seeds[table.n_seeds > 0]
    variant = _variant(axes)
    chosen = (choose(table, cells, group_by, variant, primary, cfg.level, cfg.bootstrap)
              if variant is not None and primary is not None else None)
    fields: dict[str, Any] = {
        "title": title, "table": table, "axes": tuple(axes), "columns": tuple(headline),
        "primary": primary, "setting": setting or "all cells", "seeds": seeds_text(good),
        "provenance": _provenance(cells), "level": cfg.level,
        "sections": _sections(table, axes, primary, cfg.top, chosen), "details": tuple(details),
        "selection": chosen}
    pooled = [a for a in varying(cells, axes_in(cells)) if a not in group_by and a != "seed"]
    notes = _notes(fields, cells, pooled, compared, cfg.alpha)
    fields["notes"] = tuple(notes[:1] + (list(tiers[2]) if tiers else []) + notes[1:])
    shown = display(chosen, table, axes) if chosen is not None else ("", (), ())
    return Board(**fields, tier_axis=tier_axis, tables=(shown,) if shown[1] else ())


def full_table(cells: pd.DataFrame, cfg: ReportConfig) -> pd.DataFrame:
    """``leaderboard_full.csv``: every registered metric present, aggregated per setting."""
    group_by = [a for a in cfg.group_by if a in cells]
    return aggregate(cells, group_by, _numeric(cells, metrics_in(cells)), cfg.level)


def csv_table(board: Board) -> pd.DataFrame:
    """``leaderboard.csv``: the board's rows with the headline metrics' numbers and marks, the
    untrained control where there is one, and each row's provenance (no formatting)."""
    t = board.table
    cols = ["rank", "tier", *board.axes, *(c for c in t.columns if c in board.table.attrs.get(
        "group_by", []) and c not in board.axes), "n_seeds", "failed"]
    for m in board.columns:
        cols += [f"{m.name}_{s}" for s in ("mean", "lo", "hi", "rank", "best", "tied", "sig")]
        cols += [f"{p}{m.name}_mean" for p in ("control_", "delta_")]
        cols += [f"changed_{m.name}_n", f"changed_{m.name}_of"]
    cols += list(PROVENANCE)
    return t[[c for c in _unique(cols) if c in t]]


def best_rows(board: Board) -> dict[str, dict[str, Any]]:
    """Per ranked headline metric, its best row (grid values, mean) — for metrics.json."""
    out = {}
    for m in (m for m in board.columns if m.ranked):
        col = f"{m.name}_mean"
        if board.table[col].notna().any():
            i = board.table[col].idxmax() if m.higher else board.table[col].idxmin()
            row = board.table.loc[i]
            out[m.name] = {"value": round(float(row[col]), 6),
                           **{a: plain(row[a]) for a in board.table.attrs.get("group_by", [])}}
    return out
