"""GPU packing proven without a GPU: a local Ray with two logical GPUs, cells at 0.25 GPU.

Ray schedules by the numbers it is given, so logical GPUs exercise exactly what a GPU node
would: which tasks share a device, and which device each task is shown (``CUDA_VISIBLE_DEVICES``).
What is asserted is what the tasks recorded (tests/runtime/gpu_probe_plugin.py), never a timing:
each task's device, and an interval per task during which all of them were running.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
import ray
import torch

from pipeline.config import ComputeConfig, expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.plugins import load_plugins
from pipeline.runtime.backends.executor import check_resources, run_cells, start_local
from pipeline.runtime.store import files

pytestmark = [pytest.mark.ray, pytest.mark.slow]
PLUGIN = str(Path(__file__).with_name("gpu_probe_plugin.py"))
CELLS, GPUS, SHARE = 4, 2, 0.5
META = {"git_sha": "test", "dataset_hash": "test", "code_version": "test"}


def _places(cells, root):
    """Each cell's folder and record fields, as the train stage hands them to run_cells."""
    return {c.cell_id: root / c.cell_id for c in cells}, {c.cell_id: META for c in cells}


def _record(root, cell):
    return files.read_json(root / cell.cell_id / "cell.json")


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gpu_probe")


@pytest.fixture(scope="module")
def logical_gpus(probe_dir):
    """A local Ray on 127.0.0.1 with 2 logical GPUs and enough logical CPUs for 8 tasks at once."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CBENCH_GPU_PROBE_DIR", str(probe_dir))  # inherited by every Ray worker
    mp.setenv("CBENCH_GPU_PROBE_COUNT", str(CELLS))
    start_local(num_cpus=CELLS, num_gpus=GPUS)
    yield
    ray.shutdown()
    mp.undo()


def _setup(tiny_params, loss="gpu_probe", device="cpu"):
    """``device: cpu``: the GPUs are logical, so the cells train on the CPU (``auto`` would name
    CUDA in the cell's id, since each task is given a GPU)."""
    tiny_params["plugins"] = [PLUGIN] if loss == "gpu_probe" else []
    tiny_params["grid"].update(loss=[loss], k=[4], seed=list(range(CELLS)))
    tiny_params["train"].update(epochs=1, device=device)
    tiny_params["compute"].update(num_cpus=1, num_gpus=SHARE)
    load_plugins(tiny_params["plugins"])  # as config.load does, before validation
    params = from_mapping(tiny_params)
    d = params.data
    return params, load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)


def test_cells_share_each_gpu_at_once(logical_gpus, probe_dir, tiny_params, tmp_path):
    params, dataset = _setup(tiny_params)
    cells = expand(params)
    assert len(cells) == CELLS
    outcomes = run_cells(cells, dataset, *_places(cells, tmp_path), params.compute, 1, [],
                         lambda o: None, params.plugins)
    assert [o.status for o in outcomes] == ["ok"] * CELLS, [o.reason for o in outcomes]
    records = [json.loads(p.read_text()) for p in probe_dir.glob("*.json")]
    assert len(records) == CELLS and len({r["task"] for r in records}) == CELLS
    by_device = defaultdict(list)
    for r in records:
        assert len(r["gpu_ids"]) == 1  # a fraction of one GPU, never parts of two
        assert r["cuda_visible_devices"] == r["gpu_ids"][0]  # the task sees its device
        by_device[r["gpu_ids"][0]].append(r)
    assert sorted(by_device) == [str(i) for i in range(GPUS)]
    for device, rs in by_device.items():
        assert len(rs) == round(1 / SHARE), device  # two cells per device
        assert len({r["pid"] for r in rs}) == len(rs)  # in as many processes
        assert max(r["start"] for r in rs) <= min(r["end"] for r in rs), device  # all at once
    for c in cells:
        assert _record(tmp_path, c)["status"] == "ok"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a node without CUDA")
def test_cuda_cell_on_a_node_without_cuda_fails_with_the_reason(logical_gpus, tiny_params,
                                                                 tmp_path):
    params, dataset = _setup(tiny_params, loss="infonce")
    cpu_cell = expand(params)[0]
    cuda_params, _ = _setup(tiny_params, loss="infonce", device="cuda")
    cuda_cell = expand(cuda_params)[1]
    done: list[str] = []
    both = [cuda_cell, cpu_cell]
    outcomes = run_cells(both, dataset, *_places(both, tmp_path), params.compute, 1, [],
                         lambda o: done.append(o.cell_id))
    assert sorted(done) == sorted([cpu_cell.cell_id, cuda_cell.cell_id])  # the grid went on
    by_id = {o.cell_id: o for o in outcomes}
    assert by_id[cpu_cell.cell_id].status == "ok"
    failed = by_id[cuda_cell.cell_id]
    assert failed.status == "failed"
    assert failed.reason.startswith("DeviceUnavailableError: device = 'cuda': CUDA is not "
                                    "available here (node ")
    record = _record(tmp_path, cuda_cell)
    assert record["status"] == "failed" and "CUDA is not available" in record["reason"]
    # the node failed it, not the cell: retried on the next run (with compute.num_gpus > 0, say)
    assert failed.failure_class == record["failure_class"] == "environment"


def test_fractional_gpus_above_one_are_refused_before_anything_runs():
    base = dict(ray_address=None, storage=None, num_cpus=1.0, max_retries=0)
    for ok in (0.0, 0.25, 1.0, 2.0):
        check_resources(ComputeConfig.model_construct(num_gpus=ok, **base))
    bad = ComputeConfig.model_construct(num_gpus=1.5, **base)
    with pytest.raises(ValueError, match=r"compute.num_gpus = 1.5: above 1 it must be a whole "
                                         r"number of GPUs \(e.g. 1 or 2\)"):
        run_cells([object()], None, {}, {}, bad, 1, [], lambda o: None)  # type: ignore[list-item, arg-type]


def test_cells_asking_for_gpus_a_local_instance_lacks_are_refused(tiny_params, tmp_path):
    """Without this, Ray would keep them waiting for a GPU forever."""
    if ray.is_initialized():
        ray.shutdown()
    params, dataset = _setup(tiny_params, loss="infonce")
    start_local(num_cpus=1, num_gpus=0)
    try:
        with pytest.raises(ValueError, match=rf"compute.num_gpus = {SHARE}: the local Ray instance "
                                             r"has 0 GPUs, so no cell could ever start"):
            one = expand(params)[:1]
            run_cells(one, dataset, *_places(one, tmp_path), params.compute, 1, [], lambda o: None)
    finally:
        ray.shutdown()
