"""The studies behind docs/FINDINGS.md are profiles that `resolve` accepts and that can decide:
at least MIN_SEEDS seeds at every point, both objectives from the same seeds (the same initial
weights and training rows), statistics recorded at several epochs, and a `-gpu` twin at the
paper's size with the same data and objectives."""

from __future__ import annotations

import pytest

from pipeline.config import expand, load, rules
from pipeline.stats.comparisons.inference import MIN_SEEDS
from tests.conftest import ROOT

IMAGE_STUDIES = {"mnist-study.yaml": "mnist-resnet18-gpu.yaml",
                 "fashion-mnist-study.yaml": "fashion-mnist-resnet18-gpu.yaml"}


def _params(name: str):
    return load(ROOT / "params.yaml", ROOT / "profiles" / name)


@pytest.mark.parametrize("study", sorted(IMAGE_STUDIES))
def test_an_image_study_can_decide_its_claim(study):
    params = _params(study)
    cells = expand(params)
    seeds = {o: {c.seed for c in cells if c.objective == o} for o in ("contrastive", "supervised")}
    assert len(seeds["contrastive"]) >= MIN_SEEDS and seeds["contrastive"] == seeds["supervised"]
    assert {c.arch for c in cells} == {"resnet18"}
    epochs = params.train.epochs
    assert 0 in params.stats.epochs and any(0 < e < epochs for e in params.stats.epochs)
    assert params.train.precision == "bfloat16" and params.arch_options["resnet18"]["width"] == 16
    assert params.data.name in ("mnist", "fashion_mnist")


@pytest.mark.parametrize(("study", "gpu"), sorted(IMAGE_STUDIES.items()))
def test_each_image_study_has_its_paper_sized_twin(study, gpu, monkeypatch):
    monkeypatch.setattr(rules, "local_cores", lambda: 64)  # sized for a GPU node's cores
    small, big = _params(study), _params(gpu)
    assert big.data.name == small.data.name and big.grid.objective == small.grid.objective
    assert big.arch_options["resnet18"]["width"] == 64 and big.train.device == "cuda"
    assert big.train.epochs >= 100 and len(big.grid.seed) >= len(small.grid.seed)


def test_the_betser_study_has_seeds_on_both_sweeps():
    params = _params("betser-synthetic.yaml")
    assert len(params.grid.seed) >= MIN_SEEDS
    assert params.grid.embed_dim == [32, 64, 128, 256] and len(params.grid.batch_size) >= 3
