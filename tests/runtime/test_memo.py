"""A stage's memo (pipeline.runtime.memo): the same inputs and untouched files skip the stage,
anything else runs it in full; resolve and train skip a rerun with nothing to do without
importing torch, and a damaged cell, an edited param or a new code file still reruns them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.runtime import memo
from tests.conftest import ROOT, mlflow_runs


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_key_follows_inputs_environment_and_extra(here, monkeypatch):
    (here / "a.yaml").write_text("x: 1\n")
    first = memo.key("s", ["a.yaml"], {"profile": None})
    assert memo.key("s", ["a.yaml"], {"profile": None}) == first
    assert memo.key("other", ["a.yaml"], {"profile": None}) != first
    assert memo.key("s", ["a.yaml"], {"profile": "p.yaml"}) != first
    (here / "a.yaml").write_text("x: 2\n")
    assert memo.key("s", ["a.yaml"], {"profile": None}) != first
    second = memo.key("s", ["a.yaml"], {"profile": None})
    with monkeypatch.context() as changed:  # CBENCH_STORE as it was afterwards, set or not
        changed.setenv("CBENCH_STORE", str(here / "elsewhere"))
        assert memo.key("s", ["a.yaml"], {"profile": None}) != second
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")  # only the stages' own variables count
    assert memo.key("s", ["a.yaml"], {"profile": None}) == second
    for name, value in (("CBENCH_WARM", "on"), ("CBENCH_WARM", "off"),
                        ("CBENCH_WARM_IDLE_SECONDS", "5"), ("CBENCH_WARM_PID_FILE", "/tmp/p")):
        monkeypatch.setenv(name, value)  # warm or cold: the same stage
        assert memo.key("s", ["a.yaml"], {"profile": None}) == second, name
    started = dict(os.environ)
    monkeypatch.setenv("RAY_SET_BY_RAY_INIT", "1")  # the environment as the stage started
    assert memo.key("s", ["a.yaml"], {"profile": None}, started) == second
    assert memo.key("s", ["a.yaml"], {"profile": None}) != second
    (here / "a.yaml").unlink()
    assert memo.key("s", ["a.yaml"], {"profile": None}) != second  # missing is an input too


def test_the_key_covers_every_code_file():
    files = memo.code_files()
    names = {str(p.relative_to(ROOT)) for p in files}
    assert {"pipeline/runtime/memo.py", "stages/train.py", "pipeline/losses/infonce.py",
            "pipeline/config/load.py"} <= names
    assert all(p.suffix == ".py" for p in files)


def _cell(folder, files=("cell.json", "embeddings.parquet")):
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_bytes(b"x" * 10)


def test_fresh_only_while_every_recorded_file_is_unchanged(here):
    _cell(here / "store" / "c1")
    _cell(here / "store" / "c2")
    (here / "out.json").write_text("{}")
    folders = [here / "store" / "c1", here / "store" / "c2"]
    assert memo.fresh("s", "k") is None  # no memo yet
    memo.save("s", "k", files=["out.json"], folders=folders, info={"cells": 2})
    assert memo.fresh("s", "k") == {"cells": 2}
    assert memo.fresh("s", "another key") is None

    cases = {
        "truncated": lambda: (here / "store/c1/embeddings.parquet").write_bytes(b"x" * 9),
        "same size, rewritten later": lambda: os.utime(here / "store/c2/cell.json",
                                                       ns=(1, 1)),
        "deleted": lambda: (here / "store/c1/cell.json").unlink(),
        "a new file in a cell": lambda: (here / "store/c2/snapshot_epoch_3.parquet")
        .write_bytes(b"y"),
        "an output edited": lambda: (here / "out.json").write_text('{"a": 1}'),
    }
    for what, damage in cases.items():
        memo.save("s", "k", files=["out.json"], folders=folders, info={"cells": 2})
        assert memo.fresh("s", "k") is not None, what
        damage()
        assert memo.fresh("s", "k") is None, what

    memo.save("s", "k", files=["out.json"], folders=folders)
    text = (here / "out.json").read_bytes()  # DVC moves an output into its cache, links it back
    (here / "out.json").unlink()
    (here / "out.json").write_bytes(text)
    os.utime(here / "out.json", ns=(2, 2))
    assert memo.fresh("s", "k") is not None  # the same bytes: still fresh
    memo.memo_path("s").write_text("{not json")
    assert memo.fresh("s", "k") is None
    memo.forget("s")
    assert not memo.memo_path("s").exists()
    memo.forget("s")  # forgetting twice is fine


def _env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("CBENCH_PROFILE", "DVC_ROOT", "MLFLOW_TRACKING_URI")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _stage(workspace, stage):
    """Run ``stage.main([])`` in a subprocess; its stdout and whether torch was imported."""
    code = (f"import sys; from stages import {stage}; rc = {stage}.main([]); "
            "print('torch imported:', 'torch' in sys.modules); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_resolve_skips_an_unchanged_rerun_without_importing_torch(tmp_path, tiny_params):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    first = _stage(tmp_path, "resolve")
    assert "params ok: 2 cells\n" in first and "torch imported: True" in first
    resolved = (tmp_path / "params.resolved.yaml").read_bytes()

    again = _stage(tmp_path, "resolve")
    assert "params ok: 2 cells; unchanged since the last resolve" in again
    assert "torch imported: False" in again
    assert (tmp_path / "params.resolved.yaml").read_bytes() == resolved

    (tmp_path / "params.resolved.yaml").write_text("# edited by hand\n")  # an output touched
    assert "unchanged" not in _stage(tmp_path, "resolve")
    assert (tmp_path / "params.resolved.yaml").read_bytes() == resolved

    tiny_params["grid"]["k"] = [4, 8, 16]  # an input changed
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    assert "params ok: 3 cells\n" in _stage(tmp_path, "resolve")

    tiny_params["grid"]["k"] = [0]  # invalid: the error, and no memo of the last good run used
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    proc = subprocess.run([sys.executable, "-m", "stages.resolve"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "invalid params" in proc.stderr
    assert not (tmp_path / memo.memo_path("resolve")).exists()


def test_resolve_does_not_memoise_a_grid_with_plugins(tmp_path, tiny_params):
    tiny_params["plugins"] = [str(ROOT / "tests" / "fixtures" / "nan_loss.py")]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    _stage(tmp_path, "resolve")
    assert "unchanged" not in _stage(tmp_path, "resolve")


@pytest.mark.slow
def test_train_skips_an_unchanged_rerun_and_still_retrains_a_damaged_cell(tmp_path, tiny_params):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    env = {**_env(), "CBENCH_STORE": str(tmp_path / "store")}
    for stage in ("resolve", "prepare"):
        subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=tmp_path, env=env,
                       check=True, capture_output=True, timeout=300)

    def train() -> str:
        code = ("import sys; from stages import train; rc = train.main([]); "
                "print('torch imported:', 'torch' in sys.modules); sys.exit(rc)")
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    assert "0 already done (skipped), 2 to train" in train()
    grid = (tmp_path / "data" / "grid.json").read_bytes()
    runs = len(mlflow_runs(tmp_path / "mlruns.db"))
    again = train()
    assert ("train: 2 cells in the grid: 2 already done (skipped), 0 to train; nothing changed "
            "since the last train") in again
    assert "torch imported: False" in again
    assert (tmp_path / "data" / "grid.json").read_bytes() == grid
    assert len(mlflow_runs(tmp_path / "mlruns.db")) == runs  # the no-op adds no MLflow run

    folder = Path(json.loads(grid)["cells"][0]["path"])
    assert folder.is_relative_to(tmp_path / "store")
    damaged = folder / "embeddings.parquet"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    out = train()  # the memo sees the file changed: the full stage finds the cell damaged
    assert "1 already done (skipped), 1 to train" in out and "torch imported: True" in out
    assert "nothing changed" in train()

    (tmp_path / "mlruns.db").rename(tmp_path / "lost.db")  # the tracking store is gone
    out = train()
    assert "nothing changed" not in out and "logged 2 done cells that had no finished" in out
    assert "nothing changed" in train()
