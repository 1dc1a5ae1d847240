"""``cbench leaderboard``: one or more runs' per-cell tables merged into one leaderboard, with
each row's provenance; different code fingerprints of one cell refused unless asked."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.cli import main


def _cells(path, fingerprint="f1", recall=(0.30, 0.10, 0.20), seeds=(0,)):
    rows = [{"rank": 0, "cell_id": f"c{arch}{k}s{s}", "loss": "infonce", "arch": arch, "k": k,
             "seed": s, "status": "ok", "reason": "", "recall_at_1": r + 0.01 * s,
             "cv": 0.2 + 0.01 * i, "code_fingerprint": fingerprint, "git_sha": "abc"}
            for s in seeds
            for i, ((arch, k), r) in enumerate(zip((("linear", 4), ("mlp", 4), ("linear", 16)),
                                                   recall, strict=True))]
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def _table(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
            if line.startswith("|") and not line.startswith(("|:", "|-"))]


def test_leaderboard_of_one_run_is_ranked_by_the_primary(tmp_path, capsys):
    assert main(["leaderboard", _cells(tmp_path / "a.csv")]) == 0
    rows = _table(capsys.readouterr().out)
    assert rows[0][:3] == ["#", "arch", "k"] and "R@1 (%) ↑" in rows[0]
    assert [r[1:3] for r in rows[1:]] == [["linear", "4"], ["linear", "16"], ["mlp", "4"]]


def test_cells_filter_and_sort(tmp_path, capsys):
    path = _cells(tmp_path / "a.csv")
    assert main(["leaderboard", path, "--cells", "--filter", "arch=linear", "--sort", "cv"]) == 0
    rows = _table(capsys.readouterr().out)
    assert rows[0][:3] == ["rank", "k", "seed"]
    assert [r[1] for r in rows[1:]] == ["4", "16"]  # by cv ascending


def test_merging_runs_keeps_provenance(tmp_path, capsys):
    a = _cells(tmp_path / "a.csv", seeds=(0, 1))
    b = _cells(tmp_path / "b.csv", seeds=(1, 2))  # seed 1 is in both: the same cells
    out = tmp_path / "merged.csv"
    assert main(["leaderboard", a, b, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 seeds" in text and f"runs {a}, {b}." in text
    merged = pd.read_csv(out)
    assert len(merged) == 9  # 3 settings × seeds 0, 1, 2
    shared = merged[merged.seed == 1]
    assert (shared.source == f"{a};{b}").all() and (merged[merged.seed == 2].source == b).all()
    assert {"code_fingerprint", "git_sha", "source"} <= set(merged.columns)


def test_mixed_code_fingerprints_are_refused_unless_asked(tmp_path, capsys):
    a = _cells(tmp_path / "a.csv", "f1")
    b = _cells(tmp_path / "b.csv", "f2", recall=(0.5, 0.1, 0.2))
    assert main(["leaderboard", a, b]) == 2
    err = capsys.readouterr().err
    assert "code_fingerprint f1 in" in err and "f2 in" in err and "--allow-mixed" in err
    assert main(["leaderboard", a, b, "--allow-mixed"]) == 0
    rows = _table(capsys.readouterr().out)
    assert "code_fingerprint" in rows[0]
    assert len(rows) == 1 + 6  # each setting once per code version
    assert rows[1][rows[0].index("code_fingerprint")] == "f2"  # its R@1 of 50% leads


@pytest.mark.parametrize(("args", "message"), [
    (["--sort", "nope"], "--sort 'nope': unknown column"),
    (["--sort", "arch"], "ranks by a metric; use --cells"),
    (["--filter", "arch"], "--filter 'arch': expected COLUMN=VALUE"),
    (["--filter", "arch=cnn"], "no cell left"),
    (["--params", "none.yaml"], "--params none.yaml: no such file"),
])
def test_usage_errors_exit_2(tmp_path, capsys, args, message):
    assert main(["leaderboard", _cells(tmp_path / "a.csv"), *args]) == 2
    assert message in capsys.readouterr().err


def test_missing_table(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path / "none.csv")]) == 2
    assert "no per-cell table; run `make run` first" in capsys.readouterr().err
