"""The cluster model (pipeline/runtime/backends/capacity.py) against closed forms and brute
force."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import random
import re
import sys
from pathlib import Path

import pytest

from pipeline.runtime.backends import capacity
from pipeline.runtime.backends.capacity import (
    Overheads,
    crossover_nodes,
    makespan,
    predict,
    slots_per_node,
)


def greedy_reference(times, slots):
    """List scheduling from its definition: each cell in turn onto the least-loaded slot."""
    loads = [0.0] * slots
    for t in times:
        i = min(range(slots), key=lambda j: (loads[j], j))
        loads[i] += t
    return max(loads)


def optimum(times, slots):
    """The best makespan over every assignment of cells to slots (brute force)."""
    best = math.inf
    for assign in itertools.product(range(slots), repeat=len(times)):
        loads = [0.0] * slots
        for t, s in zip(times, assign, strict=True):
            loads[s] += t
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("cells", [1, 7, 8, 9, 100, 1001])
@pytest.mark.parametrize("slots", [1, 3, 8, 64, 2000])
def test_equal_times_take_ceil_cells_over_slots_rounds(cells, slots):
    for order in capacity.ORDERS:
        assert makespan([2.5] * cells, slots, order) == pytest.approx(
            math.ceil(cells / slots) * 2.5)


def test_one_long_cell_dominates():
    times = [1.0] * 40 + [100.0] + [1.0] * 40
    assert makespan(times, 8, "lpt") == 100.0  # it starts first; the rest fit beside it
    assert makespan([100.0, *times[:40], *times[41:]], 8, "given") == 100.0
    # in the given order it starts when the 40 cells before it have run 5 rounds on 8 slots
    assert makespan(times, 8, "given") == 5 + 100.0
    assert makespan(times, 200, "given") == 100.0  # a slot for every cell


def test_given_order_is_the_greedy_definition():
    rng = random.Random(3)
    for _ in range(200):
        times = [rng.choice([0.0, rng.uniform(0, 10), float(rng.randint(1, 4))])
                 for _ in range(rng.randint(1, 40))]
        slots = rng.randint(1, 9)
        assert makespan(times, slots) == pytest.approx(greedy_reference(times, slots))
        assert makespan(times, slots, "lpt") == pytest.approx(
            greedy_reference(sorted(times, reverse=True), slots))


def test_lpt_within_graham_bound_of_brute_force_optimum():
    rng = random.Random(0)
    worst = 0.0
    for _ in range(150):
        slots = rng.randint(2, 3)
        times = [float(rng.randint(1, 20)) for _ in range(rng.randint(slots + 1, 8))]
        opt = optimum(times, slots)
        lpt, given = makespan(times, slots, "lpt"), makespan(times, slots, "given")
        assert opt - 1e-9 <= lpt <= (4 / 3 - 1 / (3 * slots)) * opt + 1e-9
        assert opt - 1e-9 <= given <= (2 - 1 / slots) * opt + 1e-9
        worst = max(worst, lpt / opt)
    assert worst > 1  # the cases include some where LPT is not optimal: the bound is exercised


def test_lpt_tight_example():
    # Graham's worst case for m = 2: 3, 3, 2, 2, 2 -> LPT 7, optimum 6 (3+3 | 2+2+2)
    times = [3.0, 3.0, 2.0, 2.0, 2.0]
    assert optimum(times, 2) == 6.0
    assert makespan(times, 2, "lpt") == 7.0 == 7 / 6 * optimum(times, 2)


def test_packing():
    assert slots_per_node(8, 4, 128, 4) == 32  # 0.25 GPUs per cell
    assert slots_per_node(8, 4, 64, 4) == 16  # the CPUs run out first
    assert slots_per_node(8, 2.5, 128, 1) == 16  # 0.4 GPUs per cell: two fit on a GPU
    assert slots_per_node(8, 0.5, 128, 1) == 4  # two whole GPUs per cell
    assert slots_per_node(0, 1, 16, 1) == 16  # a CPU node: its CPUs
    assert slots_per_node(0, 1, 16, 3) == 5


def test_driver_becomes_the_bottleneck_at_the_derived_crossover():
    cells, t, per_node, d = 1000, 10.0, 8, 0.05  # driver 50 s; N* = t / (s d) = 25
    times = [t] * cells
    over = Overheads(driver_per_cell=d)
    n_star = crossover_nodes(times, per_node, over).driver
    assert n_star == pytest.approx(t / (per_node * d)) == pytest.approx(25)
    for n in range(1, 25):  # below N*: ceil(C / (N s)) t >= C t / (N s) > C d
        p = predict(times, n, per_node, over)
        assert p.bottleneck == "compute" and p.compute > p.driver
    at = predict(times, 25, per_node, over)  # 200 slots, 5 rounds of 10 s = the driver's 50 s
    assert at.compute == at.driver == 50.0
    for n in (26, 50, 200):
        p = predict(times, n, per_node, over)
        assert p.compute == math.ceil(cells / (n * per_node)) * t
        assert p.driver == pytest.approx(cells * d)
        assert p.bottleneck == ("compute" if p.compute >= p.driver else "driver")  # ties: compute
    assert predict(times, 50, per_node, over).bottleneck == "driver"


def test_store_crossover_from_bandwidth_and_from_cell_rate():
    cells, t, per_node = 4000, 20.0, 16
    times = [t] * cells
    by_bytes = Overheads(0.0, bytes_per_cell=5e6, store_bandwidth=5e8)  # 10 ms per cell: 40 s
    assert by_bytes.store_per_cell == pytest.approx(1e-2)
    n_star = crossover_nodes(times, per_node, by_bytes).store
    assert n_star == pytest.approx(t / (per_node * 1e-2))  # 125
    for n in range(1, 125):  # 3 or more rounds of 20 s
        assert predict(times, n, per_node, by_bytes).bottleneck == "compute"
    p = predict(times, 125, per_node, by_bytes)  # 2000 slots: 2 rounds, the store's 40 s
    assert p.compute == 40.0 and p.store == pytest.approx(40.0)
    p = predict(times, 250, per_node, by_bytes)  # a slot for every cell: 20 s
    assert (p.compute, p.bottleneck) == (20.0, "store")
    tiny = Overheads(0.0, bytes_per_cell=5e6, store_bandwidth=1e9)  # 20 s: never above t_max
    assert crossover_nodes(times, per_node, tiny).store is None
    by_rate = Overheads(0.0, store_cells_per_second=50)  # 20 ms per cell: 80 s
    assert crossover_nodes(times, per_node, by_rate).store == pytest.approx(t * 50 / per_node)
    p = predict(times, 16, per_node, by_rate)  # 16 rounds of 20 s > the store's 80 s
    assert (p.compute, p.store, p.bottleneck) == (320.0, pytest.approx(80.0), "compute")
    p = predict(times, 100, per_node, by_rate)  # past N* = 62.5: 3 rounds, 60 s < 80 s
    assert (p.compute, p.bottleneck) == (60.0, "store")


def test_no_crossover_when_the_longest_cell_outlasts_the_framework():
    times = [1.0] * 99 + [1000.0]
    over = Overheads(driver_per_cell=0.5)  # 50 s of driver work < the 1000 s cell
    assert crossover_nodes(times, 8, over).driver is None
    assert crossover_nodes(times, 8, Overheads(0.0)).driver is None
    for n in (1, 10, 100):
        assert predict(times, n, 8, over).bottleneck == "compute"


def test_worker_store_seconds_add_to_each_cell_and_startup_to_the_wall():
    over = Overheads(0.0, worker_store_per_cell=0.5, startup=7.0)
    p = predict([1.0] * 10, 1, 2, over)
    assert p.compute == 5 * 1.5 and p.wall == 5 * 1.5 + 7.0


def test_cell_costs_reads_ok_records():
    records = [{"status": "ok", "wall_seconds": 3.5,
                "files": {"a": {"bytes": 10, "sha256": "x"}, "b": {"bytes": 5, "sha256": "y"}}},
               {"status": "failed", "wall_seconds": 1.0, "files": {}},
               {"status": "ok", "wall_seconds": 2}]
    assert capacity.cell_costs(records) == [capacity.CellCost(3.5, 15), capacity.CellCost(2.0, 0)]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: predict([1.0], 0, 8, Overheads(0.0)), "nodes = 0: must be a whole number >= 1"),
    (lambda: predict([1.0, -2.0], 1, 8, Overheads(0.0)), "times[1] = -2.0: must be a finite"),
    (lambda: makespan([], 4), "times is empty"),
    (lambda: makespan([1.0], 0), "slots = 0: must be a whole number >= 1"),
    (lambda: makespan([1.0], 2, "sorted"), "order = 'sorted': allowed given, lpt"),
    (lambda: slots_per_node(8, 0, 64, 1), "cells_per_gpu = 0: must be a finite number > 0"),
    (lambda: slots_per_node(8, -1.0, 64, 1), "cells_per_gpu = -1.0: must be a finite number > 0"),
    (lambda: slots_per_node(8, 0.4, 64, 1), "cells_per_gpu = 0.4: below 1 a cell takes whole"),
    (lambda: slots_per_node(-1, 1, 64, 1), "gpus = -1: must be a whole number >= 0"),
    (lambda: slots_per_node(8, 1, 64, 0), "cpus_per_cell = 0: must be a finite number > 0"),
    (lambda: Overheads(-0.1), "driver_per_cell = -0.1: must be a finite number >= 0"),
    (lambda: Overheads(0.0, store_bandwidth=math.inf), "store_bandwidth = inf: must be"),
])
def test_bad_inputs_name_the_parameter_value_and_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def _cluster_model(monkeypatch):
    path = Path(__file__).resolve().parents[2] / "bench" / "cluster_model.py"
    spec = importlib.util.spec_from_file_location("cluster_model", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cluster_model", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_the_command_reads_a_store_and_prints_the_derived_crossover(tmp_path, capsys, monkeypatch):
    for i, t in enumerate([10.0, 30.0]):  # ok cells of 10 s and 30 s, 2 MB each; one failed
        folder = tmp_path / "cells" / f"cell{i}" / "v1"
        folder.mkdir(parents=True)
        (folder / "cell.json").write_text(json.dumps(
            {"status": "ok", "wall_seconds": t, "files": {"e.parquet": {"bytes": 2_000_000}}}))
    failed = tmp_path / "cells" / "bad" / "v1"
    failed.mkdir(parents=True)
    (failed / "cell.json").write_text(json.dumps({"status": "failed", "wall_seconds": 1e6}))
    model = _cluster_model(monkeypatch)
    assert model.main(["--store-root", str(tmp_path), "--cells", "10000", "--nodes", "1", "1000",
                       "--gpus", "2", "--cells-per-gpu", "2", "--driver-per-cell", "0.01",
                       "--worker-store-per-cell", "0", "--store-bandwidth", "100",
                       "--startup", "0"]) == 0
    out = capsys.readouterr().out
    draw = random.Random(0).choices([10.0, 30.0], k=10000)  # what --seed 0 draws
    mean = sum(draw) / 10000  # driver 100 s, store 200 s: both above the longest cell
    assert f"N* = t_mean / (s x cost) = {mean:.3g} / (4 x 0.01) = {mean / 0.04:.3g} nodes" in out
    # store: 2 MB at 100 MB/s = 20 ms per cell -> N* = mean / (4 x 0.02)
    assert f"= {mean:.3g} / (4 x 0.02) = {mean / 0.08:.3g} nodes" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("1 ", "1000 "))]
    assert [r[0] for r in rows] == ["1", "1000"] and [r[-1] for r in rows] == ["compute", "store"]
