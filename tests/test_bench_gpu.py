"""bench/gpu.py builds its cell without the params layer: it must keep up with ``TrainSpec``.

The script only measures on a GPU machine (CI has none), so a field added to the cell's training
settings broke it unnoticed once; this runs its cell, tiny, on the CPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpu_bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_gpu", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("setting", ["fp32", "bf16"])
def test_the_cell_is_the_profiles_cell_in_each_setting(gpu_bench, setting):
    precision, memory_format = gpu_bench.SETTINGS[setting]
    cell = gpu_bench.make_cell(gpu_bench.GPU_SIZE, precision, memory_format, "cuda", 3, 4)
    assert (cell.arch, cell.loss, cell.batch_size, cell.seed) == ("resnet18", "nt_xent", 512, 3)
    assert (cell.train.precision, cell.train.memory_format) == (precision, memory_format)
    assert cell.train.device == "cuda" and cell.train.threads == 4
    assert cell.data.name == "cifar10" and cell.data.n_train == gpu_bench.GPU_SIZE.n


def test_a_tiny_cell_trains_and_counts_its_images(gpu_bench):
    size = gpu_bench.Size(n=8, batch=4, epochs=2, heldout=4)
    rate, images, start, end = gpu_bench.cell_rate(size, "fp32", "cpu", 0, 1)
    assert images == 2 * 4 * 2 * 1  # two views x batch x steps x the one timed epoch
    assert rate > 0 and end >= start
