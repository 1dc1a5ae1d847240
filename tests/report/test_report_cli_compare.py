"""`cbench compare A B`: side-by-side output and exit codes."""

from __future__ import annotations

import pytest

from pipeline.report.cli_compare import compare_main


@pytest.fixture
def csv(board, tmp_path):
    path = tmp_path / "leaderboard.csv"
    board.to_csv(path, index=False)
    return path


def test_side_by_side(csv, capsys):
    assert compare_main(["infonce", "dcl", "--csv", str(csv), "--metrics", "recall_at_1"]) == 0
    out = capsys.readouterr().out
    assert "infonce vs dcl (loss)" in out and "fixed: tau=0.1 arch=linear" in out
    lines = out.splitlines()
    k4 = next(line for line in lines if line.strip().startswith("k=4"))
    # infonce 7/3 ± 3.79, dcl 2.4 ± 3.8, difference 0.067 ± 0.12, p = 0.1344
    assert "2.3 ± 3.8" in k4 and "2.4 ± 3.8" in k4 and "0.07 ± 0.12" in k4 and "0.1345" in k4
    assert "pooled over all matched settings" in out
    pooled = lines[-1].split()
    assert pooled[:2] == ["recall_at_1", "6"]


def test_unknown_variant_exit_2(csv, capsys):
    assert compare_main(["infonce", "simclr", "--csv", str(csv)]) == 2
    err = capsys.readouterr().err
    assert "unknown loss 'simclr'; allowed: dcl, infonce, weince" in err


def test_usage_errors(csv, tmp_path, capsys):
    assert compare_main(["infonce", "dcl", "--csv", str(tmp_path / "none.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert compare_main(["infonce", "infonce", "--csv", str(csv)]) == 2
    assert compare_main(["infonce", "dcl", "--csv", str(csv), "--axis", "variant"]) == 2
    assert "allowed: loss, k, tau, arch" in capsys.readouterr().err
    assert compare_main(["infonce", "dcl", "--csv", str(csv), "--metrics", "nope"]) == 2
    assert "metrics: unknown column 'nope'" in capsys.readouterr().err
    assert compare_main(["infonce"]) == 2  # argparse: B missing
    assert compare_main(["--help"]) == 0


def test_numeric_axis(csv, capsys):
    assert compare_main(["4", "16", "--axis", "k", "--csv", str(csv), "--metrics", "cv"]) == 0
    assert "4 vs 16 (k)" in capsys.readouterr().out


def test_no_common_setting(csv, capsys):
    assert compare_main(["infonce", "weince", "--csv", str(csv)]) == 0
    assert "no setting has ok cells of both infonce and weince" in capsys.readouterr().out
