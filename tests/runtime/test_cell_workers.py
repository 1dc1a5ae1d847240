"""The train stage's forked cell workers (pipeline/runtime/backends/cell_workers.py), on real
processes: the cells they train are the cells one process trains; a worker that dies loses only its
cell, retried up to ``compute.max_retries`` and then failed (environment, no record) while the rest
of the grid goes on; the workers die with their stage; and which grids fork at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.plugins import load_plugins
from pipeline.runtime.backends import cell_workers
from pipeline.runtime.cells.failures import ENVIRONMENT
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.store import files, layout

pytestmark = pytest.mark.skipif(not cell_workers.FORK, reason="forked workers: Linux only")
PLUGIN = str(Path(__file__).with_name("worker_fault_plugin.py"))
META = {"git_sha": "test", "dataset_hash": "test", "code_version": "test"}
ROOT = Path(__file__).resolve().parents[2]


def _grid(tiny_params, losses=("infonce",), seeds=(0, 1), max_retries=2):
    tiny_params["plugins"] = [PLUGIN]
    tiny_params["grid"].update(loss=list(losses), k=[4], seed=list(seeds))
    tiny_params["train"].update(epochs=1, device="cpu", threads=1)
    tiny_params["compute"].update(num_cpus=1, num_gpus=0, max_retries=max_retries)
    load_plugins(tiny_params["plugins"])
    params = from_mapping(tiny_params)
    d = params.data
    return params, expand(params), load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)


def _run(params, cells, dataset, root):
    seen = []
    outcomes = cell_workers.run_cells(
        cells, dataset, {c.cell_id: root / c.cell_id for c in cells},
        {c.cell_id: META for c in cells}, params.compute, 1, [], seen.append, params.plugins)
    assert [o.cell_id for o in seen] == [o.cell_id for o in outcomes]  # on_done, each once
    return {o.cell_id: o for o in outcomes}


def test_forked_workers_train_the_cells_one_process_trains(tiny_params, tmp_path, monkeypatch):
    monkeypatch.delenv("CBENCH_TRAIN_WORKERS", raising=False)
    params, cells, dataset = _grid(tiny_params, seeds=(0, 1, 2))
    assert cell_workers.forked(params.compute, 1)
    got = _run(params, cells, dataset, tmp_path / "forked")
    assert sorted(got) == sorted(c.cell_id for c in cells)
    assert {o.status for o in got.values()} == {"ok"}, [o.reason for o in got.values()]
    assert len({o.record["hardware"] for o in got.values()}) == 1
    for cell in cells:
        here = run_cell(cell, dataset, tmp_path / "here" / cell.cell_id, META, 1, [])
        for view in (0, 1):
            np.testing.assert_allclose(
                files.read_embeddings(tmp_path / "forked" / cell.cell_id / layout.EMBEDDINGS,
                                        view),
                files.read_embeddings(tmp_path / "here" / cell.cell_id / layout.EMBEDDINGS,
                                        view), rtol=1e-5, atol=1e-6)
        assert got[cell.cell_id].record["final_loss"] == pytest.approx(
            here.record["final_loss"], rel=1e-5)


def test_a_lost_worker_is_retried_on_a_new_one(tiny_params, tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_KILL_DIR", str(tmp_path))
    monkeypatch.setenv("CBENCH_KILL_TIMES", "1")
    params, cells, dataset = _grid(tiny_params, losses=("worker_killer",), seeds=(0, 1, 2))
    got = _run(params, cells, dataset, tmp_path / "cells")
    assert len(list(tmp_path.glob("killed-*"))) == 1  # one worker died under a cell
    assert {o.status for o in got.values()} == {"ok"}, [o.reason for o in got.values()]
    for cell in cells:  # every cell published, the lost try's included
        record = files.read_json(tmp_path / "cells" / cell.cell_id / layout.RECORD)
        assert record["status"] == "ok"


def test_a_cell_whose_workers_keep_dying_fails_and_the_grid_goes_on(tiny_params, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("CBENCH_KILL_DIR", str(tmp_path))
    monkeypatch.setenv("CBENCH_KILL_TIMES", "1000")  # every try of a killer cell dies
    params, cells, dataset = _grid(tiny_params, losses=("infonce", "worker_killer"),
                                   seeds=(0, 1), max_retries=1)
    got = _run(params, cells, dataset, tmp_path / "cells")
    killers = [c for c in cells if c.loss == "worker_killer"]
    assert len(killers) == 2 and len(list(tmp_path.glob("killed-*"))) == 2 * 2  # a try + 1 retry
    for cell in cells:
        outcome = got[cell.cell_id]
        if cell.loss == "worker_killer":
            assert outcome.status == "failed" and outcome.failure_class == ENVIRONMENT
            assert "WorkerCrashedError" in outcome.reason and "SIGKILL" in outcome.reason
            assert "2 times" in outcome.reason and "compute.max_retries = 1" in outcome.reason
            assert not (tmp_path / "cells" / cell.cell_id / layout.RECORD).exists()  # retried
        else:  # next run
            assert outcome.status == "ok", outcome.reason


DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from pipeline.config import expand, from_mapping
    from pipeline.datasets import load_dataset
    from pipeline.plugins import load_plugins
    from pipeline.runtime.backends import cell_workers
    import copy
    from tests.conftest import ROOT, TINY, merge, read_yaml
    p = merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))
    p["plugins"] = [{plugin!r}]
    p["grid"].update(loss=["worker_sleeper"], k=[4], seed=[0, 1])
    p["train"].update(epochs=1, device="cpu", threads=1)
    load_plugins(p["plugins"])
    params = from_mapping(p)
    d = params.data
    cells = expand(params)
    data = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    root = Path({root_cells!r})
    cell_workers.run_cells(cells, data, {{c.cell_id: root / c.cell_id for c in cells}},
                           {{c.cell_id: {{}} for c in cells}}, params.compute, 1, [],
                           lambda o: None, params.plugins)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead: it waits only for its reaping
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_workers_die_with_their_stage(tmp_path):
    script = DRIVER.format(root=str(ROOT), plugin=PLUGIN, root_cells=str(tmp_path / "cells"))
    env = {**os.environ, "CBENCH_KILL_DIR": str(tmp_path)}
    env.pop("CBENCH_TRAIN_WORKERS", None)
    driver = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("sleeping-*"))) < 2:  # both cells are in their workers
            assert driver.poll() is None, driver.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the workers never started their cells"
            time.sleep(0.1)
        workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("sleeping-*")]
        assert driver.pid not in workers
        driver.send_signal(signal.SIGKILL)  # the stage alone, not its process group
        driver.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "a worker outlived its stage"
    finally:
        driver.kill()
        driver.wait()
        for p in tmp_path.glob("sleeping-*"):
            try:
                os.kill(int(p.name.split("-")[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_which_grids_fork(tiny_params, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("CBENCH_TRAIN_WORKERS", raising=False)
    compute = from_mapping(tiny_params).compute.model_copy(
        update={"ray_address": None, "num_gpus": 0.0})
    assert cell_workers.forked(compute, 1)
    assert not cell_workers.forked(compute, 2)  # OpenMP's pool does not survive a fork
    assert not cell_workers.forked(compute.model_copy(update={"num_gpus": 0.5}), 1)
    assert not cell_workers.forked(compute.model_copy(update={"ray_address": "ray://h:10001"}), 1)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert not cell_workers.forked(compute, 1)
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setenv("CBENCH_TRAIN_WORKERS", "ray")
    assert not cell_workers.forked(compute, 1)
    monkeypatch.setenv("CBENCH_TRAIN_WORKERS", "forked")
    with pytest.raises(ValueError, match=r"\$CBENCH_TRAIN_WORKERS = 'forked': allowed: auto, ray"):
        cell_workers.forked(compute, 1)
