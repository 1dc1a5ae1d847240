"""What each cell cost (pipeline/runtime/cells/cost.py), checked against the OS's own counters.

- peak RSS: one cell trained by ``run_cell`` (what a Ray worker calls) in a fresh subprocess
  that first allocates and frees a spike larger than the cell; its recorded peak is compared
  with the kernel's high-water mark read by ``getrusage`` (before and after the cell), with an
  independent psutil sampler, and with a floor: the array the cell copies;
- samples per second from the record against n · epochs / train seconds;
- RAPL energy against a hand-computed wrap-around in a fake sysfs folder, and "not measured"
  where there is none;
- the Pareto front against the O(n²) definition; the report's columns and totals.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from pipeline.metrics import NOT_MEASURED
from pipeline.report.grid import leaderboard
from pipeline.report.grid.figure_plan import cost_points, pareto_front, plan
from pipeline.report.grid.tables import COST_TOTALS, aggregate, cost_totals
from pipeline.report.render import figures
from pipeline.runtime.cells import cost
from tests.conftest import ROOT, venv_env
from tests.oracles.cost_oracles import pareto_front_brute

N, DIM, BATCH, EPOCHS = 8192, 2048, 512, 1
SPIKE = 2**31  # bytes allocated, touched and freed before the cell: more than it needs
# The kernel's RSS counters are per-CPU approximations (percpu_counter, batch max(32, 2·ncpu)
# pages each), so two reads of "the same" peak may differ by up to ncpu · batch pages.
CPUS = os.cpu_count() or 1
SLACK = 4 * 2**20 + CPUS * max(32, 2 * CPUS) * 4096

ONE_CELL = r"""
import json, resource, sys, tempfile, threading
from pathlib import Path

import numpy as np
import psutil

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.runtime.cells.one_cell import run_cell

params = json.loads(sys.argv[1])
cell = expand(from_mapping(params))[0]
d = params["data"]
dataset = load_dataset(d["name"], d["n_train"], d["n_heldout"], d["seed"], d["options"])
spike = np.ones(int(sys.argv[2]) // 8)  # every page touched, then handed back (munmap)
spike.sum()
del spike
lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
me, top, stop = psutil.Process(), [0], threading.Event()

def sample():
    while not stop.is_set():
        top[0] = max(top[0], me.memory_info().rss)
        stop.wait(0.002)

sampler = threading.Thread(target=sample)
sampler.start()
with tempfile.TemporaryDirectory() as tmp:
    out = run_cell(cell, dataset, Path(tmp) / "cell", {})
stop.set()
sampler.join()
since_reset = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"status": out.status, "reason": out.reason, "record": out.record,
                  "history": out.history, "lifetime": lifetime, "after": since_reset,
                  "sampled": top[0]}))
"""


@pytest.fixture(scope="module")
def one_cell() -> dict:
    from pipeline.config import merge, read_yaml
    from tests.conftest import TINY

    params = merge(read_yaml(ROOT / "params.yaml"), json.loads(json.dumps(TINY)))
    params["data"].update(n_train=N, n_heldout=256, options={"input_dim": DIM})
    params["grid"].update(k=[2], n=[N], batch_size=[BATCH])
    params["train"].update(epochs=EPOCHS, device="cpu")
    out = subprocess.run([sys.executable, "-c", ONE_CELL, json.dumps(params), str(SPIKE)],
                         capture_output=True, text=True, cwd=ROOT, env=venv_env(), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result["reason"]
    return result


@pytest.mark.slow  # one cell trained in a fresh subprocess (~40 s on 2 shared cores)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs: Linux")
def test_peak_rss_is_the_cells_own_and_agrees_with_the_kernel(one_cell):
    r, peak = one_cell["record"], one_cell["record"]["peak_rss_bytes"]
    # the kernel's high-water mark since the meter reset it (getrusage reads the same mark)
    assert peak <= one_cell["after"] + SLACK
    # not the process's lifetime peak: the spike before the cell is not counted
    assert one_cell["lifetime"] >= SPIKE
    assert peak + SPIKE // 4 < one_cell["lifetime"]
    # an independent sampler never sees more than the peak
    assert one_cell["sampled"] <= peak + SLACK
    # the floor: the training rows the cell copies (float32, fresh pages above 32 MiB) are
    # resident while it trains, on top of what the process held at its start
    assert peak - r["rss_start_bytes"] >= N * DIM * 4 - SLACK
    assert r["device"] == "cpu" and r["device_name"] and r["cuda_peak_bytes"] is None


@pytest.mark.slow  # one cell trained in a fresh subprocess (~40 s on 2 shared cores)
def test_samples_per_second_is_n_epochs_over_train_seconds(one_cell):
    r, history = one_cell["record"], one_cell["history"]
    assert BATCH * (N // BATCH) == N  # B divides n: no partial batch dropped
    assert r["train_seconds"] == pytest.approx(math.fsum(h["seconds"] for h in history),
                                               rel=1e-12)
    assert 0 < r["train_seconds"] <= r["wall_seconds"] + 1e-3
    assert r["samples_per_second"] == pytest.approx(N * EPOCHS / r["train_seconds"], rel=1e-12)


@pytest.mark.slow  # one cell trained in a fresh subprocess (~40 s on 2 shared cores)
def test_energy_of_one_cell_is_measured_or_says_so(one_cell):
    r = one_cell["record"]
    if cost.read_rapl() is None:  # no readable counter here (no powercap, or root-only)
        assert r["energy_joules"] is None and r["energy_source"] == NOT_MEASURED
    else:
        assert r["energy_joules"] >= 0 and r["energy_source"].startswith("rapl: ")


def test_throughput_drops_the_partial_batch_and_refuses_bad_sizes():
    seconds, rate = cost.throughput([1.0, 3.0], n=100, batch_size=30)
    assert seconds == 4.0 and rate == pytest.approx(2 * 90 / 4.0)
    assert cost.throughput([], n=100, batch_size=30) == (0.0, None)
    with pytest.raises(ValueError, match="batch_size = 0"):
        cost.throughput([1.0], n=10, batch_size=0)


# --- RAPL in a fake sysfs folder -----------------------------------------------------------------

def _zone(root, name, label, energy, top):
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy}\n")
    (zone / "max_energy_range_uj").write_text(f"{top}\n")
    return zone


def _set(zone, energy):
    (zone / "energy_uj").write_text(f"{energy}\n")


def test_rapl_wrap_around_by_hand(tmp_path):
    # /sys/class/powercap lists every zone side by side (links to the nested sysfs folders)
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 900, 1000)
    core = _zone(tmp_path, "intel-rapl:0:0", "core", 5, 1000)  # inside the package: not added
    dram = _zone(tmp_path, "intel-rapl:0:1", "dram", 10, 1000)
    psys = _zone(tmp_path, "intel-rapl:1", "psys", 0, 1000)  # holds the packages: not added
    mmio = _zone(tmp_path, "intel-rapl-mmio:0", "package-0", 0, 1000)  # the same package again
    with cost.CostMeter(torch.device("cpu"), powercap=tmp_path) as meter:
        _set(package, 100)  # 900 -> 1000 wraps to 0 -> 100: 100 + 100 = 200 µJ
        _set(dram, 60)  # 50 µJ
        for zone in (core, psys, mmio):
            _set(zone, 999)
    assert meter.cost is not None
    assert meter.cost.energy_joules == pytest.approx(250e-6, rel=1e-12)
    assert meter.cost.energy_source == "rapl: package-0, package-0/dram"
    assert cost.counter_delta(900, 100, 1000) == 200 and cost.counter_delta(5, 7, 1000) == 2
    with pytest.raises(ValueError, match="before = 1200"):
        cost.counter_delta(1200, 3, 1000)


def test_energy_not_measured_without_counters(tmp_path):
    with cost.CostMeter(torch.device("cpu"), powercap=tmp_path / "absent") as meter:
        pass
    assert meter.cost is not None
    assert (meter.cost.energy_joules, meter.cost.energy_source) == (None, NOT_MEASURED)
    zone = _zone(tmp_path, "intel-rapl:0", "package-0", 1, 1000)
    (zone / "energy_uj").unlink()
    (zone / "energy_uj").mkdir()  # unreadable as a file (root reads a mode-0400 file anyway)
    assert cost.read_rapl(tmp_path) is None
    with cost.CostMeter(torch.device("cpu"), powercap=tmp_path) as meter:
        pass
    assert meter.cost is not None and meter.cost.energy_source == NOT_MEASURED


def test_peak_rss_not_measured_without_proc(tmp_path):
    with cost.CostMeter(torch.device("cpu"), proc=tmp_path / "no-proc") as meter:
        pass
    assert meter.cost is not None
    assert meter.cost.peak_rss_bytes is None and meter.cost.rss_start_bytes is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_peak_is_the_allocators():
    device = torch.device("cuda")
    before = torch.empty(2**26, dtype=torch.uint8, device=device)  # held before: in the peak
    with cost.CostMeter(device) as meter:
        x = torch.ones(2**24, dtype=torch.float32, device=device)  # 64 MiB
        del x
    assert meter.cost is not None and meter.cost.cuda_peak_bytes is not None
    assert meter.cost.cuda_peak_bytes >= 2**26 + 2**26
    assert meter.cost.cuda_peak_bytes == torch.cuda.max_memory_allocated(device)
    del before


# --- the report: Pareto front, columns, totals ---------------------------------------------------

@pytest.mark.parametrize("higher", [True, False])
def test_pareto_front_is_the_definition(higher, rng):
    for _ in range(200):
        n = int(rng.integers(1, 30))
        c = rng.integers(0, 6, n).astype(float)  # few values: many ties
        s = rng.integers(0, 6, n).astype(float)
        c[rng.random(n) < 0.1] = np.nan
        s[rng.random(n) < 0.1] = np.nan
        assert pareto_front(c, s, higher).tolist() == pareto_front_brute(c, s, higher)


def test_pareto_front_refuses_mismatched_arrays():
    with pytest.raises(ValueError, match="one length"):
        pareto_front(np.zeros(3), np.zeros(2))


def _cells() -> pd.DataFrame:
    rows = []
    for loss, tau, seed, secs, r1, energy in [
            ("infonce", 0.1, 0, 10.0, 0.50, 100.0), ("infonce", 0.1, 1, 12.0, 0.54, 120.0),
            ("infonce", 0.5, 0, 4.0, 0.40, 40.0), ("infonce", 0.5, 1, 6.0, 0.42, None),
            ("dcl", 0.1, 0, 20.0, 0.52, 200.0), ("dcl", 0.1, 1, 22.0, 0.50, 220.0)]:
        rows.append({"cell_id": f"{loss}{tau}{seed}", "loss": loss, "tau": tau, "seed": seed,
                     "status": "ok", "reason": "", "train_seconds": secs, "recall_at_1": r1,
                     "wall_seconds": secs + 1, "peak_rss_bytes": 2**20 * (secs + 100),
                     "energy_joules": energy})
    return pd.DataFrame(rows)


def test_cost_points_are_setting_means_with_their_front():
    points = cost_points(_cells(), "recall_at_1").set_index(["loss", "tau"])
    assert points.loc[("infonce", 0.1), "train_seconds"] == pytest.approx(11.0)
    assert points.loc[("infonce", 0.1), "recall_at_1"] == pytest.approx(0.52)
    assert points.loc[("dcl", 0.1), "cells"] == 2
    # infonce τ=0.5 is cheapest, infonce τ=0.1 is better; dcl (21 s, 0.51) is dominated
    assert points.front.to_dict() == {("dcl", 0.1): False, ("infonce", 0.1): True,
                                      ("infonce", 0.5): True}


def test_the_report_plans_and_draws_the_pareto_figure():
    cells = _cells()
    specs = [s for s in plan(cells, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                             "recall_at_1", 0.95) if s.kind == "pareto"]
    assert len(specs) == 1
    drawing = figures.draw(specs[0])
    assert drawing.png.startswith(b"\x89PNG") and b"<svg" in drawing.svg


def test_join_carries_the_records_cost_into_cells_csv():
    grid = pd.DataFrame({"cell_id": ["a", "b"], "loss": ["infonce"] * 2, "seed": [0, 1],
                         "status": ["ok"] * 2, "reason": ["", ""]})
    records = {"a": {"train_seconds": 2.0, "samples_per_second": 128.0, "peak_rss_bytes": 7,
                     "device": "cpu", "energy_joules": None, "energy_source": NOT_MEASURED},
               "b": {}}  # a record from before costs were recorded
    board = leaderboard.join(grid, records, pd.DataFrame(), pd.DataFrame(), 1)
    assert board.train_seconds.tolist()[0] == 2.0 and math.isnan(board.train_seconds[1])
    assert board.samples_per_second.dtype == float and board.peak_rss_bytes[0] == 7
    assert board.energy_source.tolist() == [NOT_MEASURED, NOT_MEASURED]
    assert board.device.tolist() == ["cpu", ""]


def test_cost_totals_per_loss_and_per_setting():
    cells = _cells()
    per_loss = cost_totals(cells).set_index("loss")
    assert per_loss.loc["dcl", "train_seconds_total"] == pytest.approx(42.0)
    assert per_loss.loc["dcl", "energy_joules_total"] == pytest.approx(420.0)
    assert math.isnan(per_loss.loc["infonce", "energy_joules_total"])  # one cell not measured
    assert per_loss.loc["all", "train_seconds_total"] == pytest.approx(74.0)
    assert per_loss.loc["all", "peak_rss_bytes_max"] == 2**20 * 122.0
    table = aggregate(cells, ["loss", "tau"], ["recall_at_1"]).set_index(["loss", "tau"])
    assert table.loc[("infonce", 0.1), "train_seconds_total"] == pytest.approx(22.0)
    assert table.loc[("infonce", 0.1), "energy_joules_total"] == pytest.approx(220.0)
    assert set(COST_TOTALS) - {"cuda_peak_bytes_max"} <= set(table.columns)
    shown = leaderboard.cost_tables(cells)
    assert len(shown) == 1
    title, header, rows = shown[0]
    assert header[0] == "loss" and [r[0] for r in rows] == ["dcl", "infonce", "all"]
    assert rows[1][-1] == NOT_MEASURED and rows[0][-1] == "420"
