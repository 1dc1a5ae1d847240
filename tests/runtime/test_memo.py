"""A stage's memo (pipeline.runtime.memo): the same inputs and untouched files skip the stage,
anything else runs it in full; resolve and train skip a rerun with nothing to do without
importing torch, and a damaged cell, an edited param or a new code file still reruns them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
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


# The train stage's memo in the order the stage takes it (stages/train.main: the key at the
# start, the store's cells seen, the work, the memo saved): the real main() in a subprocess over
# a copy of the project's code (so that a code file can be edited during the run), with the
# driver (torch, Ray, MLflow) replaced by a stand-in that does the run's "work" as told.
DRIVER = """
import json, sys, types
from pathlib import Path
action = json.loads(sys.argv[1])
def train_grid(params):
    for path, text in action.get("append", []):  # edited while the run goes on
        with open(path, "a") as f:
            f.write(text)
    mine = {"c1": types.SimpleNamespace(status="ok")} if action.get("trained") else {}
    rows = [{"cell_id": "c1", "training_id": "c1", "path": action["cell"], "status": "ok",
             "failure_class": ""}]
    return types.SimpleNamespace(rows=rows, trained=mine, reused={}, done=1 - len(mine),
                                 failed=0, root="store")
modules = {name: types.ModuleType(name) for name in
           ("pipeline.runtime.driver", "pipeline.runtime.context", "pipeline.runtime.store.files")}
modules["pipeline.runtime.driver"].train_grid = train_grid
modules["pipeline.runtime.driver"].StaleCellsError = type("StaleCellsError", (Exception,), {})
modules["pipeline.runtime.context"].resolved_params = lambda: None
modules["pipeline.runtime.store.files"].atomic_write_json = (
    lambda path, obj: Path(path).write_text(json.dumps(obj)))
sys.modules.update(modules)
from stages import train
sys.exit(train.main([]))
"""


MAKE_DBS = """
import sys
from mlflow.tracking import MlflowClient
logged = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/logged.db")
run = logged.create_run(logged.create_experiment("contrastive-bench"))
logged.set_terminated(run.info.run_id)
MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/empty.db").search_experiments()
"""


@pytest.fixture(scope="module")
def mlflow_dbs(tmp_path_factory):
    """Two real MLflow databases: one with a finished run, one as a new client leaves it. Made
    in a process of their own, whose end closes every connection: SQLite then checkpoints each
    write-ahead log into its file, so a copy of the file alone holds the whole database. (Made
    here, after any test of this worker process registered the tracking adapter's WAL pragma,
    the run stays in ``logged.db-wal`` while the client is open: a copy of ``logged.db`` then
    reads as ``empty.db``, and the in-place rewrite below changed nothing.)"""
    folder = tmp_path_factory.mktemp("dbs")
    subprocess.run([sys.executable, "-c", MAKE_DBS, str(folder)], check=True, timeout=120,
                   env=_env())
    logged, empty = folder / "logged.db", folder / "empty.db"
    assert not Path(f"{logged}-wal").exists() and not Path(f"{empty}-wal").exists()
    identities = [memo.sqlite_identity(db) or {} for db in (logged, empty)]
    assert identities[0].get("contents") != identities[1].get("contents")
    return logged, empty


@pytest.fixture
def stage(tmp_path, mlflow_dbs):
    """A workspace (resolved params, a prepared dataset, a tracking database, a store with one
    done cell) and ``run(action, **env)``: train's main() there; "skip" or "full"."""
    project = tmp_path / "project"
    for name in ("pipeline", "stages"):
        shutil.copytree(ROOT / name, project / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    ws = tmp_path / "ws"
    (ws / "data" / "datasets").mkdir(parents=True)
    (ws / "data" / "datasets" / "train.npz").write_bytes(b"pixels")
    (ws / "params.resolved.yaml").write_text(
        yaml.safe_dump({"tracking": {"uri": "sqlite:///mlruns.db"}, "plugins": []}))
    shutil.copyfile(mlflow_dbs[0], ws / "mlruns.db")
    cell = tmp_path / "store" / "cells" / "c1" / "v1"
    _cell(cell)
    base = {**_env(), "PYTHONPATH": str(project), "CBENCH_STORE": str(tmp_path / "store")}

    def run(action=None, **env: str | None) -> str:
        given = {**base, **env}
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, json.dumps({"cell": str(cell), **(action or {})})],
            cwd=ws, env={k: v for k, v in given.items() if v is not None},
            capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if "nothing changed since the last train" in proc.stdout:
            return "skip"
        assert "train: trained" in proc.stdout, proc.stdout
        return "full"

    return types.SimpleNamespace(run=run, project=project, ws=ws, cell=cell, dbs=mlflow_dbs)


def test_train_memo_skips_an_unchanged_rerun(stage):
    assert stage.run() == "full"
    assert stage.run() == "skip"
    assert stage.run() == "skip"


def test_train_memo_keys_the_code_the_run_read_at_its_start(stage):
    infonce = stage.project / "pipeline" / "losses" / "infonce.py"
    assert stage.run({"append": [[str(infonce), "\n# edited during the run\n"]]}) == "full"
    assert stage.run() == "full"  # this run's code is not the one the last run used
    assert stage.run() == "skip"  # ... and this one's is


def _without_log(db: Path) -> None:
    """Remove a database's write-ahead log and index, as replacing a SQLite file safely does: a
    log left beside a replaced file belongs to the old database, and SQLite would read its
    pages into the new one (whether one is left depends on when the last connection
    checkpointed)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def test_train_memo_follows_the_tracking_database_not_its_file_name(stage):
    db = stage.ws / "mlruns.db"
    assert stage.run() == "full" and stage.run() == "skip"
    replacement = stage.ws / "new.db"
    shutil.copyfile(stage.dbs[1], replacement)
    _without_log(db)
    os.replace(replacement, db)  # another file: an empty MLflow database
    assert stage.run() == "full" and stage.run() == "skip"
    inode = os.stat(db).st_ino
    _without_log(db)  # the same file, rewritten in place with another database's runs. (With
    shutil.copyfile(stage.dbs[0], db)  # a stale -wal left beside it, SQLite itself — MLflow
    # too — reads the old runs back out of the log: then it is still the old database.)
    assert os.stat(db).st_ino == inode
    assert stage.run() == "full" and stage.run() == "skip"
    db.write_bytes(b"")  # what an interrupted client leaves: not an MLflow database
    assert stage.run() == "full" and stage.run() == "full"  # never memoised so
    db.unlink()
    assert stage.run() == "full"


def test_train_memo_follows_the_environment_the_stage_reads(stage, tmp_path):
    assert stage.run() == "full" and stage.run() == "skip"
    for name, value in (("XDG_CACHE_HOME", str(tmp_path / "cache")),  # the default store
                        ("CUDA_VISIBLE_DEVICES", "")):  # a cell's device "auto"
        assert stage.run(**{name: value}) == "full", name
        assert stage.run(**{name: value}) == "skip", name
    assert stage.run(MLFLOW_TRACKING_URI="sqlite:///other.db") == "full"


def test_train_memo_is_not_taken_for_a_tracking_server(stage):
    server = "http://127.0.0.1:5000"
    assert stage.run(MLFLOW_TRACKING_URI=server) == "full"
    assert stage.run(MLFLOW_TRACKING_URI=server) == "full"  # a server's runs are not checked


def test_train_memo_keeps_the_cells_as_the_run_saw_them(stage):
    done = str(stage.cell / "cell.json")
    assert stage.run({"append": [[done, " "]]}) == "full"  # changed by another, not this run
    assert stage.run() == "full"  # the cell is not the one the last run checked
    assert stage.run() == "skip"
    (stage.ws / memo.memo_path("train")).unlink()
    assert stage.run({"append": [[done, " "]], "trained": True}) == "full"  # this run wrote it
    assert stage.run() == "skip"
