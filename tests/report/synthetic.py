"""Per-cell tables shaped like the report stage's, for the writers' tests on real grids."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def synthetic_cells(params, fail_first: bool = True) -> pd.DataFrame:
    """A per-cell table shaped like the report stage's for the grid of ``params``: every grid
    axis, provenance, the default headline metrics with plausible values and widths, controls
    (control_/delta_/changed_) for the Betser statistics; the first cell failed."""
    import numpy as np

    from pipeline.config import expand
    from pipeline.report.grid.controls import CONTROL_STATS

    rng = np.random.default_rng(7)
    rows = []
    for i, cell in enumerate(expand(params)):
        row = {"rank": i + 1, **cell.grid_values(), "cell_id": cell.cell_id, "status": "ok",
               "reason": "", "git_sha": "0123456789ab", "params_hash": "5a2f068923b4",
               "dataset_hash": "5dbad1bc8590030e", "hardware": "vm x86_64 torch 2.14.1+cu130",
               "code_fingerprint": "c0ffee123456", "wall_seconds": 1.0,
               "recall_at_1": rng.uniform(0.2, 0.45), "risk_keval": rng.uniform(-3.2, -1.1),
               "ce": rng.uniform(-3.9, -1.2), "cv": rng.uniform(0.05, 0.25),
               "ad_mean": rng.uniform(0.3, 3.5), "ad_pass_frac": rng.uniform(0.05, 1.0),
               "dp_p_mean": rng.uniform(0.04, 0.5), "dp_pass_frac": rng.uniform(0.05, 1.0)}
        for s in CONTROL_STATS:
            row[f"control_{s}"] = row[s] * rng.uniform(0.8, 1.2)
            row[f"delta_{s}"] = row[s] - row[f"control_{s}"]
            row[f"changed_{s}"] = bool(rng.uniform() < 0.3)
        rows.append(row)
    cells = pd.DataFrame(rows)
    if fail_first:
        cells.loc[0, ["status", "reason"]] = ["failed", "train: NaN loss at epoch 3 (lr too high)"]
        cells.loc[0, ["recall_at_1", "risk_keval", "ce", "cv"]] = float("nan")
    return cells
