"""Small fixed leaderboards for the report tests (values chosen so the arithmetic is by hand)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def board() -> pd.DataFrame:
    """Two variants × two k × three seeds, plus one failed weince cell; rows deliberately shuffled.

    recall_at_1 for (infonce, k=4) over seeds 0, 1, 2: 1.0, 2.0, 4.0 (not a probability; chosen for
    round arithmetic); dcl's are infonce's + (0.05, 0.12, 0.03) at k=4.
    """
    rows = []
    recall = {("infonce", 4): [1.0, 2.0, 4.0], ("dcl", 4): [1.05, 2.12, 4.03],
              ("infonce", 16): [0.40, 0.50, 0.60], ("dcl", 16): [0.40, 0.50, 0.60]}
    for (loss, k), values in recall.items():
        for seed, v in enumerate(values):
            rows.append({"loss": loss, "k": k, "tau": 0.1, "arch": "linear", "seed": seed,
                         "cell_id": f"{loss[:3]}{k:02d}s{seed}", "status": "ok", "reason": "",
                         "recall_at_1": v, "risk_keval": -v, "cv": 0.2 + 0.01 * seed,
                         "wall_seconds": 1.5, "git_sha": "abc1234",
                         "params_hash": "p1", "dataset_hash": "d1", "hardware": "cpu"})
    rows.append({"loss": "weince", "k": 4, "tau": 0.1, "arch": "linear", "seed": 0,
                 "cell_id": "wei04s0", "status": "failed", "reason": "train: NaN loss",
                 "recall_at_1": float("nan"), "risk_keval": float("nan"), "cv": float("nan"),
                 "wall_seconds": 0.5, "git_sha": "abc1234", "params_hash": "p1",
                 "dataset_hash": "d1", "hardware": "cpu"})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=3).reset_index(drop=True)


@pytest.fixture
def report_cfg():
    """``report:`` of the repo's params.yaml as a ReportConfig; call with overrides."""
    from pipeline.config import ReportConfig, read_yaml

    base = read_yaml(ROOT / "params.yaml")["report"]

    def make(**overrides) -> ReportConfig:
        return ReportConfig.model_validate(base | overrides)

    return make
