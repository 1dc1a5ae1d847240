"""Parquet contract, atomic writes, and one MLflow run per cell on a real SQLite store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.datasets import laplace_dataset
from pipeline.runtime.store import files, folders
from pipeline.runtime.tracking.runs import Tracker, record_cell


def test_embeddings_schema_is_the_design_contract(tmp_path):
    z0 = np.arange(12, dtype=np.float32).reshape(4, 3)
    table = files.embeddings_table({0: z0, 1: z0 + 1}, None, {"cell_id": "abc"})
    files.write_table(table, tmp_path / "e.parquet")
    schema = pq.read_schema(tmp_path / "e.parquet")
    assert schema.field("sample_id").type == pa.int64()
    assert schema.field("label").type == pa.int32()
    assert schema.field("view").type == pa.int8()
    assert schema.field("z").type == pa.list_(pa.float32(), 3)
    np.testing.assert_array_equal(files.read_embeddings(tmp_path / "e.parquet", 1), z0 + 1)
    assert files.read_metadata(tmp_path / "e.parquet")["cell_id"] == "abc"


def test_read_frames_is_the_concatenation_of_each_file(tmp_path):
    """Many small files in one frame: pandas' concat of each file's frame with its name, also
    when a file lacks a column, has no rows or has a column of the name's (replaced)."""
    frames = {"a": pd.DataFrame({"epoch": [0, 1], "loss": [2.0, 1.5]}),
              "b": pd.DataFrame({"epoch": [0, 1, 2], "loss": [3.0, 2.0, 1.0],
                                 "tau_mean": [0.5, 0.4, 0.3], "cell_id": ["old"] * 3}),
              "c": pd.DataFrame({"epoch": pd.Series([], dtype="int64"),
                                 "loss": pd.Series([], dtype=float)})}
    paths = {}
    for name, frame in frames.items():
        files.write_frame(frame, tmp_path / f"{name}.parquet")
        paths[name] = tmp_path / f"{name}.parquet"
    got = files.read_frames(paths, "cell_id")
    want = pd.concat([files.read_frame(p).assign(cell_id=n) for n, p in paths.items()],
                     ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)  # columns in the same order
    assert files.read_frames({}, "cell_id").empty


def test_dataset_roundtrip(tmp_path):
    ds = laplace_dataset(5, 30, 10, seed=0)
    files.write_dataset(ds, tmp_path / "d.parquet")
    back = files.read_dataset(tmp_path / "d.parquet")
    np.testing.assert_array_equal(back.x_train, ds.x_train)
    np.testing.assert_array_equal(back.x_heldout, ds.x_heldout)
    assert back.content_hash() == ds.content_hash() and back.y_train is None


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "x.json"
    files.atomic_write_json(path, {"a": 1})

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        files.atomic_write_json(path, {"a": Boom()})
    assert files.read_json(path) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary left behind


def test_a_half_written_cell_is_not_done(tmp_path):
    folder = folders.cell_folder(tmp_path, "c1", "v1")
    folder.mkdir(parents=True)
    (folder / "embeddings.parquet").write_bytes(b"partial")
    assert folders.inspect(folder) == folders.CellState("todo", problem="no cell.json")
    files.atomic_write_json(folder / "cell.json", {"status": "ok"})  # a record, no checksums
    assert folders.inspect(folder).status == "todo"
    files.atomic_write_json(folder / "cell.json", {
        "status": "ok", "files": folders.checksums(folder, ["embeddings.parquet"])})
    assert folders.inspect(folder).status == "done"


def test_one_run_per_cell_across_invocations(tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    record = {"cell_id": "c0ffee", "status": "ok",
              "config": {"k": 4, "train": {"lr": 0.1},
                         "data": {"name": "laplace", "n_train": 10, "n_heldout": 10}},
              "git_sha": "abc", "dataset_hash": "d", "wall_seconds": 1.5}
    history = [{"epoch": 1, "loss": 2.0, "seconds": 0.1}, {"epoch": 2, "loss": 1.5, "seconds": 0.1}]
    for _ in range(2):  # a rerun finds the run by tag instead of creating another
        tracker = Tracker(uri, "exp")
        parent = tracker.start_parent("train", {})
        record_cell(tracker, parent, record, history)
        tracker.end(parent)
    runs = Tracker(uri, "exp").cell_runs()
    assert list(runs) == ["c0ffee/"]  # run_key: cell_id/version (no version in this record)
    run = runs["c0ffee/"]
    assert run.info.status == "FINISHED"
    assert run.data.params["train.lr"] == "0.1" and run.data.tags["git_sha"] == "abc"
    steps = tracker.client.get_metric_history(run.info.run_id, "train_loss")
    assert sorted({(m.step, m.value) for m in steps}) == [(1, 2.0), (2, 1.5)]


def test_a_local_store_is_written_through_the_write_ahead_log(tmp_path):
    """The SQLite store is in WAL mode (in the file, for every reader), and this process's
    connections commit with synchronous = NORMAL (1); another process reads what it wrote."""
    import sqlite3
    import subprocess
    import sys

    from sqlalchemy import create_engine, text

    path = tmp_path / "m.db"
    tracker = Tracker(f"sqlite:///{path}", "exp")
    run_id = tracker.start_parent("train", {})
    with sqlite3.connect(path) as db:  # a plain connection: the mode is the file's
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 1
    engine.dispose()
    code = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
            "print(db.execute('select count(*) from runs where run_uuid = ?', "
            "(sys.argv[2],)).fetchone()[0])")
    out = subprocess.run([sys.executable, "-c", code, str(path), run_id], check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "1"


def test_the_write_ahead_log_can_be_turned_off(tmp_path, monkeypatch):
    """CBENCH_MLFLOW_WAL=0 (a store on a network file system): SQLite's own journal."""
    import sqlite3

    monkeypatch.setenv("CBENCH_MLFLOW_WAL", "0")
    path = tmp_path / "m.db"
    Tracker(f"sqlite:///{path}", "exp").start_parent("train", {})
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    monkeypatch.delenv("CBENCH_MLFLOW_WAL")
    Tracker(f"sqlite:///{tmp_path / 'n.db'}", "exp")  # on again for what follows
    with sqlite3.connect(tmp_path / "n.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_uri_storage_roundtrip(tmp_path):
    """A pyarrow.fs URI (file:// here; s3:// on a cluster) takes every read and write a cell
    does."""
    import pandas as pd

    root = files.location(f"file://{tmp_path}/store")
    assert isinstance(root, files.ObjectPath)
    cell = folders.cell_folder(root, "c1", "v1")
    assert cell == f"file://{tmp_path}/store/c1/v1" and cell.name == "v1"
    assert cell.parent == root / "c1" and not cell.exists()
    assert folders.inspect(cell).status == "todo"
    z0 = np.arange(12, dtype=np.float32).reshape(4, 3)
    files.write_table(files.embeddings_table({0: z0, 1: z0 + 1}, None, {"cell_id": "c1"}),
                        cell / "embeddings.parquet")
    np.testing.assert_array_equal(files.read_embeddings(cell / "embeddings.parquet", 1), z0 + 1)
    assert files.embed_dim(cell / "embeddings.parquet") == 3
    assert files.read_metadata(cell / "embeddings.parquet")["cell_id"] == "c1"
    history = pd.DataFrame({"epoch": [1, 2], "loss": [0.5, 0.25]})
    files.write_frame(history, cell / "history.parquet")
    pd.testing.assert_frame_equal(files.read_frame(cell / "history.parquet"), history)
    assert folders.inspect(cell).status == "todo"  # no cell.json yet: not done
    sums = folders.checksums(cell, ["embeddings.parquet", "history.parquet"])
    files.atomic_write_json(cell / "cell.json", {"status": "ok", "files": sums})
    assert folders.inspect(cell).status == "done" and folders.versions(root, "c1") == ["v1"]
    local = tmp_path / "store" / "c1" / "v1"
    assert sorted(p.name for p in local.iterdir()) == ["cell.json", "embeddings.parquet",
                                                       "history.parquet"]  # no temporaries
    assert files.file_sha256(cell / "cell.json") == files.file_sha256(local / "cell.json")
    assert files.read_bytes(cell / "cell.json") == (local / "cell.json").read_bytes()
    files.remove_tree(cell)
    assert not cell.exists() and not local.exists()


def test_uri_write_failure_leaves_old_file_and_no_temporary(tmp_path):
    path = files.location(f"file://{tmp_path}/x.json")
    files.atomic_write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        files.atomic_write_bytes(path, 12345)  # fails after the temporary was opened
    assert files.read_json(path) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_unknown_uri_scheme_names_the_location():
    with pytest.raises(ValueError, match="storage location 'nosuch://bucket/x'"):
        files.filesystem("nosuch://bucket/x")


def _searched(tracker: Tracker) -> dict[str, tuple[str, dict[str, float]]]:
    """cell_metrics as MLflow's search gives it (the path of every store but a local SQLite)."""
    return {key: (str(r.info.run_id), dict(r.data.metrics))
            for key, r in tracker.cell_runs().items()}


def _nan_safe(runs: dict) -> dict:
    return {k: (run_id, {m: "nan" if v != v else v for m, v in metrics.items()})
            for k, (run_id, metrics) in runs.items()}


def test_a_local_stores_cell_runs_read_from_its_tables_are_what_the_search_returns(tmp_path):
    """cell_metrics on a SQLite store reads MLflow's tables itself: the same run ids and latest
    values as the search, with the runs the search leaves out left out (deleted, another
    experiment, no cell_id, an empty one), a metric logged as NaN and then as a number, a NaN
    latest value, and two runs of one key (the one the search lists last wins)."""
    from mlflow.tracking import MlflowClient

    from pipeline.runtime.tracking.runs import cell_metrics, run_key

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    assert cell_metrics(uri, "bench") == {}  # no store yet
    tracker, other = Tracker(uri, "bench"), Tracker(uri, "elsewhere")
    assert cell_metrics(uri, "nowhere") == {}
    client, ids = MlflowClient(uri), {}
    for i, key in enumerate(["a/v1", "b/v1", "c/v2", "gone/v1"]):
        ids[key] = tracker.cell_run(key, None, {}, existing={}, start_time=1000 + i)
        tracker.log(ids[key], metrics=[("loss", 1.0 / (i + 1), 0), ("loss", 0.5 / (i + 1), 3)])
        client.log_metric(ids[key], "recall", float("nan"), step=0)
    tracker.log(ids["b/v1"], metrics=[("recall", 0.25, 1)])  # NaN first, then a number
    client.log_metric(ids["c/v2"], "late", float("nan"), step=9)
    twin = tracker.cell_run("a/v1", None, {}, existing={}, start_time=999)  # an older twin
    tracker.log(twin, metrics=[("loss", 7.0, 0)])
    oldest = tracker.cell_run("a/v1", None, {}, existing={}, start_time=1)  # listed last
    client.delete_run(ids["gone/v1"])
    other.log(other.cell_run("x/v1", None, {}, existing={}), metrics=[("loss", 3.0, 0)])
    tracker.log(tracker.start_parent("train", {}), metrics=[("loss", 9.0, 0)])  # no cell_id
    client.create_run(tracker.experiment_id, tags={"cell_id": ""})

    read = cell_metrics(uri, "bench")
    assert _nan_safe(read) == _nan_safe(_searched(tracker))
    assert sorted(read) == ["a/v1", "b/v1", "c/v2"]
    assert read["b/v1"][1] == {"loss": 0.25, "recall": 0.25}
    assert np.isnan(read["c/v2"][1]["late"]) and np.isnan(read["c/v2"][1]["recall"])
    assert read["a/v1"] == (oldest, {})
    assert cell_metrics(uri, "elsewhere") == _searched(other)
    assert run_key("x", "v1") in cell_metrics(uri, "elsewhere")
    # the driver's read of ids and statuses: the same runs, as the search gives them
    tracker.end(ids["b/v1"], failed=True)
    tracker.end(ids["c/v2"])
    refs = tracker.cell_run_refs()
    assert {k: (r.run_id, r.status) for k, r in refs.items()} == {
        k: (str(r.info.run_id), str(r.info.status)) for k, r in tracker.cell_runs().items()}
    assert {k: r.status for k, r in refs.items()} == {
        "a/v1": "RUNNING", "b/v1": "FAILED", "c/v2": "FINISHED"}
