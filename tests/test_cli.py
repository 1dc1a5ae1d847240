"""``cbench leaderboard``: filters, sorts and rejects unknown columns by name."""

from __future__ import annotations

import pandas as pd

from pipeline.cli import main


def _board(tmp_path):
    path = tmp_path / "lb.csv"
    pd.DataFrame({"rank": [1, 2, 3], "loss": ["infonce"] * 3, "arch": ["linear", "mlp", "linear"],
                  "k": [4, 4, 16], "cv": [0.3, 0.1, 0.2], "status": ["ok"] * 3,
                  "cell_id": ["a", "b", "c"], "reason": ["", "", ""]}).to_csv(path, index=False)
    return path


def test_filter_and_sort(tmp_path, capsys):
    assert main(["leaderboard", "--csv", str(_board(tmp_path)), "--filter", "arch=linear",
                 "--sort", "cv"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()[2:] if line.startswith("|")]
    assert [r.split("|")[1].strip() for r in rows] == ["3", "1"]  # ranks, by cv ascending


def test_unknown_sort_column(tmp_path, capsys):
    assert main(["leaderboard", "--csv", str(_board(tmp_path)), "--sort", "nope"]) == 2
    assert "--sort 'nope': unknown column" in capsys.readouterr().err
