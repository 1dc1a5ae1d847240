"""Every stage rejects arguments it does not take (settings come from params.yaml), before any
work: no params are read, nothing is written."""

from __future__ import annotations

import importlib

import pytest

NO_ARGUMENTS = ["prepare", "train", "search", "bounds", "geometry", "report",
                pytest.param("stats", marks=pytest.mark.xfail(
                    strict=True, reason="stages/stats.py does not check its argv yet (its change "
                                        "is under way on another branch; drop this mark then)"))]


@pytest.mark.parametrize("stage", NO_ARGUMENTS)
def test_a_stage_rejects_arguments(stage, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no params.resolved.yaml here: reading it would fail otherwise
    module = importlib.import_module(f"stages.{stage}")
    assert module.main(["--epochs", "3"]) == 2
    err = capsys.readouterr().err
    assert f"{stage}: takes no arguments (got ['--epochs', '3'])" in err
    assert list(tmp_path.iterdir()) == []


def test_resolve_rejects_unknown_arguments(tmp_path, monkeypatch, capsys):
    from stages import resolve

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        resolve.main(["--epochs", "3"])
    assert exit_.value.code == 2 and "unrecognized arguments: --epochs 3" in capsys.readouterr().err
