"""The probe stage's table (``data/probe.parquet``) as columns of the per-cell table.

Per cell: ``linear_probe`` and ``weighted_knn_<k>`` (with ``_lo`` / ``_hi``) of the trained
encoder's output; the same with ``backbone_`` for the backbone's features; ``control_`` for the
same encoder untrained (epoch 0) and ``delta_`` = trained − untrained; ``supervised_`` from the
supervised cell sharing the encoder, initial weights and training rows; ``raw_`` for the raw
inputs (the same value on every cell of the grid). ``probe_reason`` says why a cell has none.
"""

from __future__ import annotations

import pandas as pd

from pipeline.metrics import is_metric
from pipeline.report.grid.controls import sibling_columns

PREFIX = {("trained", "head"): "", ("trained", "backbone"): "backbone_",
          ("initial", "head"): "control_", ("initial", "backbone"): "backbone_control_"}


def _scores(rows: pd.DataFrame) -> list[str]:
    """The score columns of the probe table: metrics and their interval bounds."""
    return [c for c in rows.columns if is_metric(c.removesuffix("_lo").removesuffix("_hi"))
            and c not in ("cell_id",)]


def probe_columns(cells: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """``cells`` with the probe's columns (unchanged when the table is empty)."""
    if probe.empty or "state" not in probe:
        return cells
    ok = probe[probe.probe_status == "ok"]
    scores = _scores(ok)
    out = cells.copy()
    for (state, layer), prefix in PREFIX.items():
        part = ok[(ok.state == state) & (ok.layer == layer)]
        if not part.empty:
            out = out.merge(part[["cell_id", *scores]].rename(
                columns={c: prefix + c for c in scores}), on="cell_id", how="left")
    for head in ("", "backbone_"):
        for name in (c for c in scores if not c.endswith(("_lo", "_hi", "_c"))):
            trained, control = f"{head}{name}", f"{head}control_{name}"
            if trained in out and control in out:
                out[f"{head}delta_{name}"] = out[trained] - out[control]
    raw = ok[ok.state == "raw"]
    if not raw.empty:
        for c in scores:
            out[f"raw_{c}"] = raw.iloc[0][c]
    failed = probe[probe.probe_status != "ok"][["cell_id", "probe_reason"]]
    out = out.merge(failed, on="cell_id", how="left") if len(failed) else out
    return _supervised(out, [c for c in scores if not c.endswith(("_lo", "_hi"))])


def _supervised(cells: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``supervised_<name>`` on each contrastive cell from its supervised sibling."""
    return sibling_columns(cells, {n: f"supervised_{n}" for n in names if n in cells})
