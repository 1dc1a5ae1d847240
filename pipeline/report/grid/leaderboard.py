"""The per-cell table (``reports/cells.csv``): one row per cell with its grid values, status,
provenance, and every statistic, search and bound column; and the merge of several runs' tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pipeline.metrics import COST_METRICS, NOT_MEASURED, is_metric, lookup, stage_columns
from pipeline.report.formatting import fmt_value, is_missing
from pipeline.report.grid.controls import (
    CONTROL_STATS,
    control_columns,
    sibling_columns,
    supervised_columns,
)
from pipeline.report.grid.tables import axes_in, cost_totals

REPRESENTATION_PREFIX = {"raw": "", "normalized": "norm_", "projected": "proj_"}
HEAD, BACKBONE = "head", "backbone"  # the stats table's layers (stages/stats.py)
BACKBONE_PREFIX = "backbone_"  # the metric registry's layer family
# Theorem 1 (data/bounds.parquet) under the leaderboard's names: its metrics as the registry
# names them (``total`` is ``bound``), then the verdict and the status
BOUND_COLUMNS = {**stage_columns("bounds"), "vacuous": "vacuous", "bound_status": "bound_status"}
# what each cell.json may carry about where and how the cell was made
RECORD_PROVENANCE = ("code_fingerprint", "git_sha", "dataset_hash", "hardware")
# what each cell.json may carry about what the cell cost (pipeline/runtime/cells/cost.py): numbers
# (None where not measured, NaN in the table) and text
RECORD_COST = (*COST_METRICS, "rss_start_bytes")
RECORD_COST_TEXT = ("device", "device_name", "energy_source")


def _stat_columns(stats: pd.DataFrame) -> list[str]:
    """The statistics table's metric columns and their interval bounds (registry names)."""
    def known(col: str) -> bool:
        base = col.removesuffix("_lo").removesuffix("_hi")
        return is_metric(col) or (base != col and is_metric(base))

    return [c for c in stats.columns if known(c)]


def layer_rows(stats: pd.DataFrame, layer: str = HEAD) -> pd.DataFrame:
    """The stats rows of one layer (``head``: the encoder's output; ``backbone``: the features
    its head reads). Tables written before the backbone's rows existed are all head rows."""
    if "layer" not in stats:
        return stats if layer == HEAD else stats.iloc[:0]
    return stats[stats.layer == layer]


def _layer_columns(board: pd.DataFrame, stats: pd.DataFrame, final_epoch: int, level: float,
                   layer_prefix: str = "") -> pd.DataFrame:
    """``board`` with one layer's statistics: per representation ``<layer><rep><stat>`` (and
    their interval bounds) of the trained encoder, then the untrained control
    (``<layer>control_``, ``delta_``, ``changed_``) from epoch 0."""
    final = stats[stats.epoch == final_epoch] if len(stats) else stats
    for rep, prefix in REPRESENTATION_PREFIX.items():
        part = (final[final.representation == rep] if len(final)
                else pd.DataFrame(columns=["cell_id"]))
        if (rep != "raw" or layer_prefix) and part.empty:
            continue
        cols = _stat_columns(part)
        status = {c: f"{layer_prefix}{prefix or 'raw_'}stats_{c}" for c in ("status", "reason")
                  if c in part}
        renamed = {c: layer_prefix + prefix + c for c in cols} | status
        board = board.merge(part[["cell_id", *cols, *status]].rename(columns=renamed),
                            on="cell_id", how="left")
    if len(stats) and final_epoch != 0 and (stats.epoch == 0).any():  # the untrained control
        raw = stats[stats.representation == "raw"]
        control = control_columns(raw[raw.epoch == final_epoch], raw[raw.epoch == 0], level)
        control = control.rename(columns={c: layer_prefix + c for c in control if c != "cell_id"})
        board = board.merge(control, on="cell_id", how="left")
    return board


def _backbone_supervised(board: pd.DataFrame) -> pd.DataFrame:
    """``backbone_supervised_<s>`` on each contrastive cell: the backbone statistics of the
    supervised cell sharing its encoder, initial weights and training rows."""
    return sibling_columns(board, {f"{BACKBONE_PREFIX}{s}": f"{BACKBONE_PREFIX}supervised_{s}"
                                   for s in CONTROL_STATS if f"{BACKBONE_PREFIX}{s}" in board})


def join(grid: pd.DataFrame, records: Mapping[str, Mapping[str, Any]], stats: pd.DataFrame,
         search: pd.DataFrame, final_epoch: int, bounds: pd.DataFrame | None = None,
         params_hash: str = "", level: float = 0.95) -> pd.DataFrame:
    """Join the stage tables into the per-cell table, in the grid's order (:func:`ranked` sorts
    it, once the probe's columns are in).

    grid: ``data/grid.json`` cells (grid values, status, reason); records: ``cell.json`` per cell
    id; stats: one row per (cell, epoch, layer, representation): the trained encoder's rows
    (epoch = ``final_epoch``) go in, raw columns under their names, normalised ones with
    ``norm_``, projections with ``proj_``; epoch 0 gives the untrained control (``control_``,
    ``delta_``, ``changed_`` at ``level``). The backbone's rows (``layer = backbone``, encoders
    with a head) give the same columns prefixed ``backbone_`` (``backbone_cv``,
    ``backbone_norm_cv``, ``backbone_control_cv``, ``backbone_supervised_cv``...); a backbone's
    failed statistics do not fail the cell. search, bounds: one row per cell. What each cell
    cost comes from its record (:data:`RECORD_COST`, :data:`RECORD_COST_TEXT`): NaN and
    ``energy_source = "not measured"`` where the record has no value.
    """
    board = grid.copy()
    for key in ("final_loss", "wall_seconds"):
        board[key] = board.cell_id.map(lambda c, key=key: records.get(c, {}).get(key))
    for key in RECORD_PROVENANCE:  # unless the grid already says (a newer train stage may)
        if key not in board:
            board[key] = board.cell_id.map(lambda c, key=key: records.get(c, {}).get(key, ""))
    for key in RECORD_COST:
        values = board.cell_id.map(lambda c, key=key: records.get(c, {}).get(key))
        board[key] = pd.to_numeric(values, errors="coerce").astype(float)
    for key in RECORD_COST_TEXT:  # a record without them measured nothing
        default = NOT_MEASURED if key == "energy_source" else ""
        board[key] = board.cell_id.map(
            lambda c, key=key, default=default: records.get(c, {}).get(key) or default)
    board["reason"] = board["reason"].fillna("") if "reason" in board else ""
    board["params_hash"] = params_hash
    board = _layer_columns(board, layer_rows(stats, HEAD), final_epoch, level)
    backbone = layer_rows(stats, BACKBONE)
    if len(backbone):
        board = _layer_columns(board, backbone, final_epoch, level, BACKBONE_PREFIX)
    board = _backbone_supervised(supervised_columns(board))
    if len(search):
        board = board.merge(search, on="cell_id", how="left")
    if bounds is not None and len(bounds):
        cols = [c for c in BOUND_COLUMNS if c in bounds.columns]
        board = board.merge(bounds[["cell_id", *cols]].rename(columns=BOUND_COLUMNS),
                            on="cell_id", how="left")
    return mark_failures(board)


def ranked(board: pd.DataFrame, primary: str) -> pd.DataFrame:
    """``board`` sorted best ``primary`` first (ties by cell id, failed and NaN last) with a
    ``rank`` column 1, 2, …; by cell id when the board lacks ``primary``."""
    board = board.drop(columns="rank", errors="ignore")
    if primary in board:
        better = lookup(primary).higher
        board = board.sort_values([primary, "cell_id"], ascending=[better is False, True],
                                  na_position="last")
    else:
        board = board.sort_values("cell_id")
    board = board.reset_index(drop=True)
    board.insert(0, "rank", range(1, len(board) + 1))
    return board


def mark_failures(board: pd.DataFrame) -> pd.DataFrame:
    """A cell is failed when training, statistics or search failed; the reason says which."""
    board = board.copy()
    for col, stage in (("raw_stats_status", "stats"), ("search_status", "search")):
        if col not in board:
            continue
        bad = board[col].notna() & (board[col] != "ok") & (board.status == "ok")
        reason_col = col.replace("status", "reason")
        board.loc[bad, "reason"] = stage + ": " + board.loc[bad, reason_col].astype(str)
        board.loc[bad, "status"] = "failed"
    return board


class MixedRunsError(ValueError):
    """Two runs' tables disagree about one cell (or cannot be told apart)."""


def _known(value: Any) -> bool:
    return isinstance(value, str) and value not in ("", "nan")


def merge_runs(tables: Sequence[tuple[str, pd.DataFrame]],
               allow_mixed: bool = False) -> pd.DataFrame:
    """One per-cell table from several runs' ``cells.csv`` (other machines, clusters, commits).

    tables: (source, table) pairs, in order of precedence. Each row keeps its provenance and gets
    ``source``. A cell (same ``cell_id``) in several tables is kept once (the first; ``source``
    lists every table) when their ``code_fingerprint`` agree or one is unknown. Different
    fingerprints of one cell, or cells that share every grid value but not their id (their
    configs differ outside the grid axes), raise :class:`MixedRunsError` naming both sources,
    unless ``allow_mixed``: then every row is kept, and ``code_fingerprint`` / ``source`` are what
    tells the settings apart (``attrs['split_by']``).
    """
    if not tables:
        raise ValueError("tables: no per-cell tables to merge")
    frames = [t.assign(source=str(src)) for src, t in tables]
    merged = pd.concat(frames, ignore_index=True, sort=False)
    if "code_fingerprint" not in merged:
        merged["code_fingerprint"] = ""
    merged["code_fingerprint"] = merged["code_fingerprint"].fillna("").astype(str)
    split_by: list[str] = []
    kept = []
    for _, rows in merged.groupby("cell_id", sort=False):
        prints = {p for p in rows.code_fingerprint if _known(p)}
        if len(prints) > 1:
            if not allow_mixed:
                a, b = (rows[rows.code_fingerprint == p].iloc[0] for p in sorted(prints)[:2])
                raise MixedRunsError(
                    f"cell {a.cell_id}: code_fingerprint {a.code_fingerprint} in {a.source} but "
                    f"{b.code_fingerprint} in {b.source}: trained by different code; rerun one "
                    "of them, or pass --allow-mixed to keep both as separate rows")
            split_by = ["code_fingerprint"]
            kept.append(rows.drop_duplicates("code_fingerprint"))
            continue
        first = rows.iloc[[0]].copy()
        first["source"] = ";".join(dict.fromkeys(rows.source))
        if prints:
            first["code_fingerprint"] = prints.pop()
        kept.append(first)
    out = pd.concat(kept, ignore_index=True, sort=False)
    axes = axes_in(out)
    clash = out.duplicated([*axes, *split_by], keep=False) if axes else pd.Series(False, out.index)
    if clash.any():
        if not allow_mixed:
            a, b = out[clash].sort_values(axes).iloc[:2].itertuples()
            values = ", ".join(f"{ax}={getattr(a, ax)}" for ax in axes)
            raise MixedRunsError(
                f"cells {a.cell_id} ({a.source}) and {b.cell_id} ({b.source}) share every grid "
                f"value ({values}) but not their id: their configs differ outside the grid axes "
                "(data, train or options); merge runs of one config, or pass --allow-mixed to "
                "keep each source's rows apart")
        split_by.append("source")
    out.attrs["split_by"] = split_by
    return out



MIB = 2**20
Table = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]


def cost_tables(cells: pd.DataFrame, by: str = "loss") -> tuple[Table, ...]:
    """The board's table of what the cells cost per ``by`` value (:func:`tables.cost_totals`):
    (title, header, rows as text); memory in MiB (2^20 bytes), energy "not measured" where a
    cell of the row has no reading. Empty (no table) when no cell recorded its training time."""
    if "train_seconds" not in cells or not cells["train_seconds"].notna().any():
        return ()
    table = cost_totals(cells, by)

    def text(value: Any, scale: float = 1.0, missing: str = "–") -> str:
        return missing if is_missing(value) else fmt_value(float(value) / scale)

    header = (by, "Cells (ok)", "Train time total (s)", "Wall time total (s)",
              "Samples/s (median)", "Peak RSS max (MiB)", "CUDA peak max (MiB)",
              "Energy total (J)")
    rows = tuple((str(r[by]), f"{r['cells']} ({r['ok']})", text(r.get("train_seconds_total")),
                  text(r.get("wall_seconds")), text(r.get("samples_per_second_median")),
                  text(r.get("peak_rss_bytes_max"), MIB), text(r.get("cuda_peak_bytes_max"), MIB),
                  text(r.get("energy_joules_total"), missing=NOT_MEASURED))
                 for r in table.to_dict("records"))
    devices = sorted({str(d) for d in cells.get("device", pd.Series(dtype=str)) if d})
    title = (f"What the cells cost, per {by} (totals over its cells"
             + (f"; device {', '.join(devices)}" if devices else "") + ")")
    return ((title, header, rows),)
