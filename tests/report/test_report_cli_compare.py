"""`cbench compare A B`: reads the per-cell table (reports/cells.csv by default), prints the
side-by-side and pooled tables, exit codes."""

from __future__ import annotations

import shutil

import pytest

from pipeline.cli import main
from tests.report.synthetic import ROOT


@pytest.fixture
def csv(board, tmp_path):
    path = tmp_path / "cells.csv"  # the per-cell table, as the report stage names it
    board.to_csv(path, index=False)
    return path


def test_side_by_side(csv, capsys):
    assert main(["compare", "infonce", "dcl", "--csv", str(csv), "--metrics", "recall_at_1"]) == 0
    out = capsys.readouterr().out
    assert "infonce vs dcl (loss)" in out and "fixed: tau=0.1 arch=linear" in out
    assert "95% t-interval" in out
    lines = out.splitlines()
    k4 = next(line for line in lines if line.startswith("| k=4"))
    # R@1 in %: infonce 233 ± 379, dcl 240 ± 380, difference 6.7 ± 11.7, p = 0.1344
    assert "230 ± 380" in k4 and "240 ± 380" in k4 and "7 ± 12" in k4 and "0.1345" in k4
    assert "R@1 (%) ↑" in k4
    assert "pooled over all matched settings" in out
    pooled = [c.strip() for c in lines[-1].strip("|").split("|")]
    assert pooled[:2] == ["R@1 (%) ↑", "6"]


def test_reads_cells_csv_by_default(board, tmp_path, monkeypatch, capsys):
    (tmp_path / "reports").mkdir()
    board.to_csv(tmp_path / "reports" / "cells.csv", index=False)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "infonce", "dcl"]) == 0
    out = capsys.readouterr().out
    assert "from reports/cells.csv" in out and "| k=4" in out
    assert "R@1 (%) ↑" in out and "CV" in out  # report.columns present in the table


def test_the_seed_averaged_table_is_refused(board, tmp_path, capsys):
    path = tmp_path / "leaderboard.csv"
    board.drop(columns="seed").to_csv(path, index=False)
    assert main(["compare", "infonce", "dcl", "--csv", str(path)]) == 2
    assert "no 'seed' column; compare reads the per-cell table" in capsys.readouterr().err


def test_level_follows_params_or_flag(csv, capsys):
    assert main(["compare", "infonce", "dcl", "--csv", str(csv), "--level", "0.9"]) == 0
    assert "90% t-interval" in capsys.readouterr().out


def test_unknown_variant_exit_2(csv, capsys):
    assert main(["compare", "infonce", "simclr", "--csv", str(csv)]) == 2
    err = capsys.readouterr().err
    assert "unknown loss 'simclr'; allowed: dcl, infonce, weince" in err


def test_usage_errors(csv, tmp_path, capsys):
    assert main(["compare", "infonce", "dcl", "--csv", str(tmp_path / "none.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["compare", "infonce", "infonce", "--csv", str(csv)]) == 2
    assert main(["compare", "infonce", "dcl", "--csv", str(csv), "--axis", "variant"]) == 2
    assert "allowed: loss, k, tau, arch" in capsys.readouterr().err
    assert main(["compare", "infonce", "dcl", "--csv", str(csv), "--metrics", "nope"]) == 2
    assert "metrics: unknown column 'nope'" in capsys.readouterr().err
    assert main(["compare", "infonce", "dcl", "--csv", str(csv), "--params", "nope.yaml"]) == 2
    assert "--params nope.yaml: no such file" in capsys.readouterr().err
    assert main(["compare", "infonce"]) == 2  # argparse: B missing
    assert main(["compare", "--help"]) == 0


def test_numeric_axis(csv, capsys):
    assert main(["compare", "4", "16", "--axis", "k", "--csv", str(csv), "--metrics", "cv"]) == 0
    assert "4 vs 16 (k)" in capsys.readouterr().out


def test_no_common_setting(csv, capsys):
    assert main(["compare", "infonce", "weince", "--csv", str(csv)]) == 0
    assert "no setting has ok cells of both infonce and weince" in capsys.readouterr().out
