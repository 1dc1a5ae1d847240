"""The probe stage on real cells: every representation of the trained and untrained encoders,
the raw inputs, the supervised control in the report's columns, a frozen pretrained encoder, and
a dataset without labels said once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from pipeline.probe import linear_probe
from pipeline.probe.frozen import ProbeSettings, evaluate_encoder, evaluate_inputs
from pipeline.report.grid.probe import probe_columns
from pipeline.runtime.context import PROBE

pytestmark = [pytest.mark.slow]
SETTINGS = ProbeSettings(c_grid=[0.01, 1.0], val_fraction=0.2, knn_k=[5, 20],
                         knn_temperature=0.07, level=0.95)


def _blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 3, n)
    return (rng.normal(size=(n, 6)) + 3.0 * np.eye(3, 6)[y]).astype(np.float32), y


def test_an_encoder_is_scored_on_its_head_and_its_backbone(rng):
    x, y = _blobs(400, rng)
    xt, yt = _blobs(200, rng)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    scores = evaluate_encoder("mlp", mlp, x, y, xt, yt, SETTINGS, np.random.default_rng(1))
    assert set(scores) == {"head", "backbone"}
    assert scores["head"]["features"] == 4 and scores["backbone"]["features"] == 16
    for row in scores.values():
        assert 0.8 < row["linear_probe"] <= 1.0  # separable blobs survive a random MLP
        assert row["linear_probe_lo"] <= row["linear_probe"] <= row["linear_probe_hi"]
        assert {"weighted_knn_5", "weighted_knn_20", "weighted_knn_20_lo"} <= set(row)
    # the head's row is exactly the probe on the encoder's outputs
    with torch.no_grad():
        direct = linear_probe(mlp(torch.from_numpy(x)).numpy(), y,
                              mlp(torch.from_numpy(xt)).numpy(),
                              yt, SETTINGS.c_grid, SETTINGS.val_fraction,
                              np.random.default_rng(1).spawn(2)[0])
    assert scores["head"]["linear_probe"] == pytest.approx(direct.accuracy, abs=1e-9)
    raw = evaluate_inputs(x, y, xt, yt, SETTINGS, np.random.default_rng(2))
    assert raw["features"] == 6 and raw["linear_probe"] > 0.9


def test_the_report_columns_of_the_probe():
    cells = pd.DataFrame({"cell_id": ["a", "b", "s"],
                          "objective": ["contrastive"] * 2 + ["supervised"],
                          "loss": ["infonce", "dcl", "cross_entropy"], "k": [4, 4, 0],
                          "tau": [0.5, 0.5, 0.0], "tau_schedule": ["constant"] * 2 + ["none"],
                          "n": 100, "arch": "mlp", "embed_dim": 8, "batch_size": 32, "seed": 0,
                          "status": "ok"})
    probe = pd.DataFrame([
        {"cell_id": c, "state": st, "layer": ly, "probe_status": "ok", "probe_reason": "",
         "linear_probe": v, "linear_probe_lo": v - 0.1, "linear_probe_hi": v + 0.1,
         "weighted_knn_20": v / 2}
        for c, base in (("a", 0.8), ("b", 0.7), ("s", 0.9))
        for (st, ly), v in ((("trained", "head"), base), (("trained", "backbone"), base + 0.05),
                            (("initial", "head"), 0.5), (("initial", "backbone"), 0.55))]
        + [{"cell_id": "", "state": "raw", "layer": "input", "probe_status": "ok",
            "probe_reason": "", "linear_probe": 0.6, "weighted_knn_20": 0.3}])
    out = probe_columns(cells, probe).set_index("cell_id")
    assert out.loc["a", "linear_probe"] == 0.8
    assert out.loc["a", "backbone_linear_probe"] == pytest.approx(0.85)
    assert out.loc["a", "control_linear_probe"] == 0.5
    assert out.loc["a", "delta_linear_probe"] == pytest.approx(0.3)
    assert (out.raw_linear_probe == 0.6).all() and (out.raw_weighted_knn_20 == 0.3).all()
    assert out.loc["b", "supervised_linear_probe"] == 0.9  # the supervised sibling's score
    assert np.isnan(out.loc["s", "supervised_linear_probe"])


def _run(tmp_path, monkeypatch, params) -> pd.DataFrame:
    from stages import prepare, probe, resolve, train

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "store"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    try:
        for stage in (resolve, prepare, train, probe):
            assert stage.main([]) == 0, stage.__name__
    finally:
        import ray

        ray.shutdown()  # the train stage started a local Ray in this process
    return pd.read_parquet(tmp_path / PROBE)


@pytest.mark.ray
def test_the_stage_scores_trained_untrained_and_raw(tiny_params, tmp_path, monkeypatch):
    tiny_params["data"].update(name="gaussian_mixture", options={"input_dim": 16, "components": 4})
    tiny_params["grid"].update(objective=["contrastive", "supervised"], arch=["mlp"], k=[4])
    tiny_params["arch_options"] = {"mlp": {"hidden": [32]}}
    tiny_params["probe"] = {"c_grid": [0.1, 1.0], "val_fraction": 0.2, "knn_k": [5, 50],
                            "knn_temperature": 0.07}
    table = _run(tmp_path, monkeypatch, tiny_params)
    assert set(table.probe_status) == {"ok"}
    cells = table[table.state != "raw"]
    assert len(cells) == 2 * 2 * 2  # 2 cells x (trained, initial) x (head, backbone)
    assert set(cells.layer) == {"head", "backbone"} and set(cells.state) == {"trained", "initial"}
    raw = table[table.state == "raw"].iloc[0]
    assert raw.layer == "input" and raw.features == 16 and raw.n_train == 600
    assert (table.n_train == 600).all() and (table.n_test == 200).all()  # the whole splits
    assert table.linear_probe.between(0, 1).all() and "weighted_knn_50" in table


@pytest.mark.ray
def test_a_dataset_without_labels_gets_an_empty_table(tiny_params, tmp_path, monkeypatch,
                                                     capsys):
    table = _run(tmp_path, monkeypatch, tiny_params)
    assert table.empty
    assert "'laplace' has no class labels: no linear probe or kNN" in capsys.readouterr().out


@pytest.mark.ray
def test_a_frozen_pretrained_encoder_is_scored_without_training(tiny_params, tmp_path,
                                                               monkeypatch):
    timm = pytest.importorskip("timm")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0,
                                img_size=32, depth=2)
    torch.save(vit.state_dict(), tmp_path / "vit.pt")
    tiny_params["data"].update(name="digits", n_train=400, n_heldout=200, options={}, augment={})
    tiny_params["grid"].update(arch=["dino"], embed_dim=[192], n=[256], k=[4])
    tiny_params["arch_options"] = {"dino": {
        "model": "vit_tiny_patch16_224", "weights": str(tmp_path / "vit.pt"), "head": "none",
        "model_kwargs": {"img_size": 32, "depth": 2}}}
    tiny_params["train"]["epochs"] = 0
    tiny_params["stats"].update(epochs=[0], projections=4)
    tiny_params["probe"] = {"c_grid": [1.0], "val_fraction": 0.2, "knn_k": [5],
                            "knn_temperature": 0.07}
    table = _run(tmp_path, monkeypatch, tiny_params)
    assert set(table.probe_status) == {"ok"}
    head = table[(table.state == "trained") & (table.layer == "head")].iloc[0]
    assert head.features == 192 and head.n_train == 400  # the frozen tower's CLS features
    assert set(table[table.state != "raw"].layer) == {"head"}  # head none: one representation
    frozen = table[table.state != "raw"].set_index("state")
    assert frozen.loc["trained", "linear_probe"] == frozen.loc["initial", "linear_probe"]
