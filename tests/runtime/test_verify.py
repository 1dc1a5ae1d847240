"""``cbench verify``'s pieces: a retrained cell agrees with its stored self, another training
does not, the tolerances, and the sample (one per training, seeded)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from pipeline.config import expand, from_mapping, merge, read_yaml
from pipeline.datasets import load_dataset
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.cells.verify import TOLERANCES, Tolerance, compare, sample, verify_cell
from pipeline.runtime.store import files
from tests.conftest import ROOT, TINY

META = {"git_sha": "test", "dataset_hash": "test", "code_version": "test", "version": "v"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    params = merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))
    params["grid"].update(k=[4], seed=[0, 1])
    params["train"]["epochs"] = 1
    p = from_mapping(params)
    d = p.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    root = tmp_path_factory.mktemp("verify")
    cells = expand(p)
    for cell in cells:
        assert run_cell(cell, dataset, root / cell.cell_id, META).status == "ok"
    return cells, dataset, root


def test_a_retrained_cell_reproduces(trained, tmp_path):
    cells, dataset, root = trained
    result = verify_cell(cells[0], root / cells[0].cell_id, "v", dataset, META, scratch=tmp_path)
    assert result.reproduced and not result.error
    assert {c.name for c in result.checks} == set(TOLERANCES)
    drift = next(c for c in result.checks if c.name == "embeddings")
    assert drift.retrained < 1e-5  # same machine, same code: rounding at most


def test_another_training_does_not(trained):
    cells, _, root = trained
    checks = {c.name: c for c in compare(root / cells[0].cell_id, root / cells[1].cell_id)}
    assert not checks["embeddings"].agrees and checks["embeddings"].retrained > 1e-2
    # the independent reference: the two seeds' embeddings, compared by hand
    a = files.read_embeddings(root / cells[0].cell_id / "embeddings.parquet", 0)
    b = files.read_embeddings(root / cells[1].cell_id / "embeddings.parquet", 0)
    assert np.linalg.norm(a - b) / np.linalg.norm(a) > 1e-2


def test_tolerance():
    t = Tolerance(atol=0.1, rtol=0.01, what="x")
    assert t.agrees(10.0, 10.2) and not t.agrees(10.0, 10.25)
    assert t.agrees(float("nan"), float("nan")) and not t.agrees(1.0, float("nan"))


def test_the_sample_takes_done_trainings_once_each_and_is_seeded():
    rows = [{"cell_id": f"c{i}", "training_id": f"t{i // 2}", "status": "ok" if i != 3 else
             "failed", "version": "v"} for i in range(10)]
    pool = sample(rows, 99, 0)
    assert [r["cell_id"] for r in pool] == ["c0", "c2", "c4", "c6", "c8"]  # t1's ok cell is c2
    a, b = sample(rows, 3, 7), sample(rows, 3, 7)
    assert a == b and len(a) == 3 and len({r["training_id"] for r in a}) == 3
    assert dataclasses.is_dataclass(TOLERANCES["cv"])
