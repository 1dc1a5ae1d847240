"""The stats stage computes the same statistics for the backbone's views as for the head's, in a
second compute, and tells the rows apart by ``layer``."""

from __future__ import annotations

import pandas as pd

import stages.stats
from pipeline.config import from_mapping
from pipeline.grid import GRID_AXES
from pipeline.runtime.backends import dask_ops
from pipeline.runtime.store import layout


def test_backbone_rows_beside_head_rows(tiny_params, monkeypatch, tmp_path):
    tiny_params["stats"]["epochs"] = [0]
    params = from_mapping(tiny_params)
    final = params.train.epochs
    for cell in ("a", "b"):
        (tmp_path / cell).mkdir()
    (tmp_path / "a" / layout.BACKBONE).write_bytes(b"")  # only cell a's encoder has a backbone
    grid = pd.DataFrame({"cell_id": ["a", "b"], "status": ["ok", "ok"], "reason": ["", ""],
                         "path": [str(tmp_path / "a"), str(tmp_path / "b")],
                         **{axis: [0, 0] for axis in GRID_AXES}})
    calls, written = [], {}

    def fake_compute(paths, cfg, compute_cfg, *, level):
        calls.append({key: str(path) for key, path in paths.items()})
        rows = [{"cell_id": c, "epoch": e, "representation": "raw", "status": "ok",
                 "cv": float(len(calls))} for c, e in paths]
        return pd.DataFrame(rows), pd.DataFrame({"cell_id": [c for c, _ in paths], "coord": 0})

    monkeypatch.setattr(stages.stats, "resolved_params", lambda: params)
    monkeypatch.setattr(stages.stats, "read_grid", lambda: grid)
    monkeypatch.setattr(dask_ops, "compute_stats", fake_compute)
    monkeypatch.setattr(stages.stats.files, "write_frame",
                        lambda frame, path: written.__setitem__(path, frame))
    assert stages.stats.main([]) == 0
    head, backbone = calls
    assert head == {("a", final): str(tmp_path / "a" / "embeddings.parquet"),
                    ("a", 0): str(tmp_path / "a" / "embeddings_e0000.parquet"),
                    ("b", final): str(tmp_path / "b" / "embeddings.parquet"),
                    ("b", 0): str(tmp_path / "b" / "embeddings_e0000.parquet")}
    assert backbone == {("a", final): str(tmp_path / "a" / layout.BACKBONE),
                        ("a", 0): str(tmp_path / "a" / layout.backbone_snapshot(0))}
    table = written[stages.stats.STATS]
    assert list(table.columns[:1 + len(GRID_AXES)]) == ["cell_id", *GRID_AXES]
    assert table.groupby("layer").size().to_dict() == {"backbone": 2, "head": 4}
    assert set(table[table.layer == "head"].cv) == {1.0}  # the first compute: the head's
    assert set(table[table.layer == "backbone"].cv) == {2.0}
    assert set(written[stages.stats.STATS_DETAIL].layer) == {"head", "backbone"}
