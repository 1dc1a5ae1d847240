"""pipeline.runtime.context: where the stages read and write, the manifest, provenance."""

from __future__ import annotations

import subprocess

import pytest

from pipeline.config import ConfigError, expand, from_mapping, merge
from pipeline.datasets import laplace_dataset
from pipeline.runtime import context
from pipeline.runtime.store import files


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "store"))
    return tmp_path


def test_tracking_uri_resolves_a_relative_sqlite_file_against_the_project(workspace, tiny_params,
                                                                          monkeypatch):
    params = from_mapping(tiny_params)
    assert context.tracking_uri(params) == f"sqlite:///{workspace}/mlruns.db"
    monkeypatch.setenv("DVC_ROOT", "/repo")  # a DVC experiment's copy logs into the project's db
    assert context.tracking_uri(params) == "sqlite:////repo/mlruns.db"
    for uri in ("sqlite:////abs/m.db", "http://127.0.0.1:5000"):
        p = from_mapping(merge(tiny_params, {"tracking": {"uri": uri}}))
        assert context.tracking_uri(p) == uri


def test_resolved_params_says_how_to_make_them(workspace):
    with pytest.raises(ConfigError, match=r"params.resolved.yaml is missing: run `make run`"):
        context.resolved_params()


def test_manifest_helpers(workspace, tiny_params):
    params = from_mapping(tiny_params)
    cells = expand(params)  # two cells (k = 4, 8)
    rows = [{"cell_id": cells[0].cell_id, "status": "ok", "path": str(workspace / "s" / "a")},
            {"cell_id": cells[1].cell_id, "status": "failed", "path": str(workspace / "s" / "b")},
            {"cell_id": "gone", "status": "ok", "path": ""}]  # not in this grid, no folder
    files.atomic_write_json(context.GRID, {"cells": rows})
    grid = context.read_grid()
    assert list(context.trained_rows(grid).cell_id) == [cells[0].cell_id, "gone"]
    assert context.trained_cells(params) == [cells[0]]  # only cells of the current grid
    assert context.trained_cells(params, grid.iloc[1:]) == []
    assert context.cell_folders(grid) == {cells[0].cell_id: workspace / "s" / "a",
                                          cells[1].cell_id: workspace / "s" / "b"}
    assert context.cells_root(params) == workspace / "store" / "cells"
    assert context.dataset_path("laplace") == context.DATASETS / "laplace.parquet"


def test_shared_dataset_uploads_once_per_content(workspace, tiny_params):
    ds = laplace_dataset(4, 20, 10, seed=0)
    files.write_dataset(ds, context.dataset_path(ds.name))
    local = from_mapping(tiny_params)
    assert context.shared_dataset(local) == context.dataset_path(ds.name).resolve()
    remote_params = from_mapping(merge(tiny_params, {"compute": {"storage": f"file://{workspace}/remote"}}))
    remote = context.shared_dataset(remote_params)
    assert str(remote) == f"file://{workspace}/remote/datasets/laplace.parquet"
    copy = workspace / "remote" / "datasets" / "laplace.parquet"
    assert copy.read_bytes() == context.dataset_path(ds.name).read_bytes()
    stamp = copy.stat().st_mtime_ns
    context.shared_dataset(remote_params)  # same content hash: not uploaded again
    assert copy.stat().st_mtime_ns == stamp


def test_git_sha_marks_a_dirty_tree_and_survives_no_repository(workspace):
    assert context.git_sha() == "unknown"  # tmp_path is no git repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], check=True)
    (workspace / "f.txt").write_text("a")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert context.git_sha() == head
    (workspace / "f.txt").write_text("b")
    assert context.git_sha() == f"{head}-dirty"
