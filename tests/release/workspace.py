"""A finished workspace written by hand (no pipeline run): the report files a release reads,
with values a test chooses, so each assertion can be checked against the frame it came from."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

LOSSES = ("infonce", "dcl", "weince")
PARAMS = "# generated from params.yaml + profiles/tiny.yaml; do not edit\ndata:\n  name: laplace\n"


def cells_frame(shift: dict[str, float] | None = None, seeds: int = 3) -> pd.DataFrame:
    """Cells of 3 losses × 2 k × ``seeds`` seeds; ``shift``: add this to a loss's recall."""
    rng = np.random.default_rng(7)
    rows = []
    for loss in LOSSES:
        for k in (4, 16):
            for seed in range(seeds):
                r1 = 0.3 + 0.05 * LOSSES.index(loss) + (shift or {}).get(loss, 0.0)
                cell_id = hashlib.sha256(f"{loss}/{k}/{seed}".encode()).hexdigest()[:12]
                rows.append({
                    "cell_id": cell_id, "training_id": cell_id,
                    "version": "aaaa0000", "code_fingerprint": "c0de", "dataset_hash": "da7a",
                    "params_hash": "9a9a", "git_sha": "f9f11fb", "objective": "contrastive",
                    "loss": loss, "k": k, "tau": 0.5, "tau_schedule": "constant", "n": 256,
                    "arch": "linear", "embed_dim": 8, "batch_size": 64, "seed": seed,
                    "status": "ok", "reason": "", "hardware": "x86_64 torch",
                    "wall_seconds": 1.0 + seed, "train_seconds": 0.5 + seed,
                    "samples_per_second": 512.0, "peak_rss_bytes": 2.0e8 + seed,
                    "device": "cpu", "energy_source": "not measured",
                    "recall_at_1": r1 + rng.normal(0, 0.01),
                    "risk_keval": -2.0 + rng.normal(0, 0.01), "risk_keval_se": 0.02,
                    "cv": 0.2, "cv_lo": 0.18, "cv_hi": 0.22, "ad_mean": np.nan,
                    "control_cv": 0.3, "reproduced": np.nan})
    return pd.DataFrame(rows)


def leaderboard(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: mean and a ±2·sd interval over seeds of R@1 and the risk."""
    key = ["objective", "loss", "k", "tau", "tau_schedule", "n", "arch", "embed_dim",
           "batch_size"]
    out = cells.groupby(key, as_index=False).agg(
        n_seeds=("seed", "size"), recall_at_1_mean=("recall_at_1", "mean"),
        recall_at_1_sd=("recall_at_1", "std"), risk_keval_mean=("risk_keval", "mean"),
        risk_keval_sd=("risk_keval", "std"))
    for m in ("recall_at_1", "risk_keval"):
        out[f"{m}_lo"] = out[f"{m}_mean"] - 2 * out.pop(f"{m}_sd")
        out[f"{m}_hi"] = out[f"{m}_mean"] + (out[f"{m}_mean"] - out[f"{m}_lo"])
    return out


def ranks(order: tuple[str, ...] = ("weince", "dcl", "infonce"),
          tiers: tuple[int, ...] = (1, 1, 2)) -> pd.DataFrame:
    return pd.DataFrame({"tier": tiers, "loss": order, "mean_rank": [1.2, 1.9, 2.9]})


def write_workspace(path: Path, cells: pd.DataFrame | None = None,
                    rank_table: pd.DataFrame | None = None) -> Path:
    cells = cells_frame() if cells is None else cells
    reports = path / "reports"
    (reports / "plots").mkdir(parents=True, exist_ok=True)
    cells.to_csv(reports / "cells.csv", index=False)
    leaderboard(cells).to_csv(reports / "leaderboard.csv", index=False)
    (ranks() if rank_table is None else rank_table).to_csv(reports / "ranks.csv", index=False)
    pd.DataFrame({"a": ["weince"], "b": ["dcl"], "p_a_better": [0.6]}).to_csv(
        reports / "pairs.csv", index=False)
    (reports / "leaderboard.md").write_text("| loss |\n| --- |\n| dcl |\n", encoding="utf-8")
    (reports / "plots" / "critical_difference.svg").write_text(
        '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
        '<text x="1" y="9">cd</text></svg>', encoding="utf-8")
    (path / "params.resolved.yaml").write_text(PARAMS, encoding="utf-8")
    return path
