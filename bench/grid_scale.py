"""Benchmark: the analysis stages' cost per cell, against the same computations in one process.

    python bench/grid_scale.py [--sizes 100 1000] [--repeats 3] [--workdir DIR] [--code DIR]

Grids: profiles/grid-1000.yaml (4 losses x 5 k x 5 tau x 2 embedding sizes x 5 seeds = 1000
tiny linear cells, 1 epoch on 500 Laplace points) and its 100-cell part (tau = 0.1, d = 8:
4 x 5 x 1 x 1 x 5, settings of 5 seeds as in the 1000), whose cells are among the 1000, so the
cell store trains them once. Each grid gets a workspace (params.resolved.yaml, data/, reports/,
mlruns.db); resolve, prepare and train run there first, train timed apart (it skips the cells
the store holds: ``$CBENCH_STORE``, as the pipeline).
(a) stage: ``python -m stages.<name>`` as DVC runs it, a subprocess in the workspace (wall time):
    stats, search, bounds, probe, report. ``--code DIR``: the stages of another checkout (e.g.
    the code before a change; (b) always runs this checkout's).
(b) in-process: the computations each stage runs, called in a loop in this process, one thread
    (as each Dask worker), no Dask, no subprocess: stats: ``cell_tasks.stats_cell`` per
    embeddings file and ``stats_tables``; search: ``search_one`` per cell and
    ``search_tables``; bounds: ``bounds_one`` per cell and ``bounds_table``; probe:
    ``probe_cell`` per cell and the raw inputs' row (nothing on unlabelled data such as these
    grids: the stage only writes an empty table); report: ``stages.report.read_inputs`` (the
    stage tables and every cell's record and history), ``build`` and ``write`` (every table and
    figure). The cells' own files are read in both. Imports are done and each function has run
    once before timing.
What (a) adds to (b) is the stages' overhead: interpreter start and imports, the Dask cluster's
start and stop, shipping batches and results, writing the stage tables, the report's MLflow
logging. The Dask stages use ``stats.n_workers`` worker processes, (b) one: on a quiet machine
with that many cores a ratio below 1 is the parallel speed-up.
Printed per grid, per stage, in total and for the target's four stages (``target``: stats,
search, bounds, report; probe computes nothing on these unlabelled grids): seconds, milliseconds
per cell, ratio (a) / (b); then
the marginal cost per cell between the two grids, (T_1000 - T_100) / 900, for (a) and (b), and
its ratio: fixed costs (interpreter, imports, cluster start) cancel in it, and (a)'s fixed part
is estimated as T_100 - 100 x marginal. Medians of ``--repeats``, (a) and (b) interleaved stage
by stage so that load from other processes hits both. Target (issue 16): per cell, the stats,
search, bounds and report stages together cost at most 1.5x (b).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.pop("RAY_ADDRESS", None)  # a local instance on 127.0.0.1 for train, never a cluster

import torch  # noqa: E402
import yaml  # noqa: E402

sys.path.insert(0, str(ROOT))

from pipeline.datasets import DATASETS  # noqa: E402
from pipeline.probe.frozen import ProbeSettings  # noqa: E402
from pipeline.report.build import build  # noqa: E402
from pipeline.report.figure_plan import norm_cells  # noqa: E402
from pipeline.report.publish import write  # noqa: E402
from pipeline.runtime import cell_tasks, context, layout, storage, tables  # noqa: E402
from pipeline.runtime.probe_ops import probe_cell, probe_inputs  # noqa: E402
from stages import report as report_stage  # noqa: E402

PROFILE = ROOT / "profiles" / "grid-1000.yaml"
SUBSETS = {1000: {}, 100: {"tau": [0.1], "embed_dim": [8]}}  # grid keys laid over the profile
STAGES = ("stats", "search", "bounds", "probe", "report")
TARGET = ("stats", "search", "bounds", "report")  # issue 16: together at most 1.5x in-process
SETUP = ("resolve", "prepare", "train")


def make_workspace(folder: Path, size: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    profile = yaml.safe_load(PROFILE.read_text())
    profile["grid"].update(SUBSETS[size])
    (folder / "profile.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return folder


def stage_env(code: Path, workspace: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(code), DVC_ROOT=str(workspace), PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def run_stage(name: str, code: Path, workspace: Path, log: Path) -> float:
    """Wall seconds of ``python -m stages.<name>`` in ``workspace``; its output goes to ``log``."""
    args = [sys.executable, "-m", f"stages.{name}"]
    if name == "resolve":
        args += ["--params", str(ROOT / "params.yaml"), "--profile", "profile.yaml"]
    start = time.perf_counter()
    with open(log, "ab") as out:
        done = subprocess.run(args, cwd=workspace, env=stage_env(code, workspace), stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3 if name == "report" else 0):  # 3: some cells failed
        raise SystemExit(f"stages.{name} in {workspace} exited {done.returncode}; see {log}")
    return seconds


def _stats() -> None:
    """What stages/stats.py computes: every ok cell's final and snapshot embeddings."""
    params, grid = context.resolved_params(), context.read_grid()
    ok = context.trained_rows(grid)
    folders, final = context.cell_folders(ok), params.train.epochs
    paths = {(c, final): folders[c] / layout.EMBEDDINGS for c in ok.cell_id}
    for epoch in params.stats.epochs:
        if epoch != final:
            paths.update({(c, epoch): folders[c] / layout.snapshot(epoch)
                          for c in ok.cell_id})
    results: list = []
    for (cell_id, epoch), path in paths.items():
        results += cell_tasks.stats_cell(cell_id, epoch, path, params.stats, params.report.level)
    tables.stats_tables(results)


def _cells_and_dataset() -> tuple:
    params = context.resolved_params()
    cells = context.trained_cells(params)
    return params, cells, storage.read_dataset(context.shared_dataset(params)), \
        context.cell_folders()


def _search() -> None:
    params, cells, dataset, folders = _cells_and_dataset()
    results = [cell_tasks.search_one(c, dataset, str(folders[c.cell_id]), params.search)
               for c in cells]
    tables.search_tables(cells, results)


def _bounds() -> None:
    params, cells, dataset, folders = _cells_and_dataset()
    results = [cell_tasks.bounds_one(c, dataset, str(folders[c.cell_id]), params.bounds)
               for c in cells]
    tables.bounds_table(cells, results)


def _probe() -> None:
    params = context.resolved_params()
    if DATASETS[params.data.name].labels != "class":
        return  # the stage writes an empty table: no computation
    _, cells, dataset, folders = _cells_and_dataset()
    p = params.probe
    settings = ProbeSettings(p.c_grid, p.val_fraction, p.knn_k, p.knn_temperature,
                             params.report.level)
    for c in cells:
        probe_cell(c, dataset, str(folders[c.cell_id]), settings)
    probe_inputs(dataset, settings, params.data.seed)


def _report(out: Path) -> None:
    params, grid = context.resolved_params(), context.read_grid()
    report = build(report_stage.read_inputs(params, grid))
    write(report, out, report_stage.read_norms(grid, norm_cells(report.figures)))


IN_PROCESS: dict[str, Callable[[], None]] = {
    "stats": _stats, "search": _search, "bounds": _bounds, "probe": _probe,
    "report": lambda: _report(Path("bench-reports"))}


def in_process(name: str, workspace: Path) -> float:
    here = Path.cwd()
    os.chdir(workspace)
    try:
        start = time.perf_counter()
        IN_PROCESS[name]()
        return time.perf_counter() - start
    finally:
        os.chdir(here)


def warm_up(workspace: Path, stages: list[str]) -> None:
    """Run each in-process computation once on the smallest grid, untimed (lazy imports, torch
    and matplotlib initialisation)."""
    for name in stages:
        in_process(name, workspace)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], choices=sorted(SUBSETS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the workspaces here (reused by a later run); default: a temporary "
                         "folder")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="checkout whose stages (a) runs (default: this one)")
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    args = ap.parse_args(argv)
    load = os.getloadavg()
    print(f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{os.cpu_count()} cores; stages from {args.code.resolve()}; "
          f"store {os.environ.get('CBENCH_STORE', '(default)')}; median of {args.repeats}",
          flush=True)
    torch.set_num_threads(1)
    tmp = None if args.workdir else tempfile.mkdtemp(prefix="cbench-grid-scale-")
    workdir = args.workdir or Path(tmp)  # type: ignore[arg-type]
    sizes = sorted(args.sizes)
    spaces = {n: make_workspace(workdir / f"grid-{n}", n) for n in sizes}
    log = workdir / "stages.log"
    try:
        for n in sizes:
            setup = {s: run_stage(s, ROOT, spaces[n], log) for s in SETUP}
            cells = len(storage.read_json(spaces[n] / context.GRID)["cells"])
            assert cells == n, (cells, n)
            print(f"grid {n}: resolve {setup['resolve']:.1f} s, prepare {setup['prepare']:.1f} s, "
                  f"train {setup['train']:.1f} s (cells already in the store are skipped)",
                  flush=True)
        # every stage table present before the warm-up reads them, and the tables of the stages
        # left out of --stages (the report reads them all) in every workspace, once, untimed
        for n in sizes:
            for name in STAGES:
                if name not in args.stages or n == sizes[0]:
                    run_stage(name, args.code, spaces[n], log)
        warm_up(spaces[sizes[0]], args.stages)
        times: dict[tuple[int, str, str], list[float]] = {}
        for r in range(args.repeats):
            for n in sizes:
                for name in args.stages:
                    a = run_stage(name, args.code, spaces[n], log)
                    b = in_process(name, spaces[n])
                    times.setdefault((n, name, "stage"), []).append(a)
                    times.setdefault((n, name, "in"), []).append(b)
                print(f"repeat {r + 1}, {n} cells: stages "
                      + ", ".join(f"{s} {times[(n, s, 'stage')][-1]:.1f}" for s in args.stages)
                      + " s; in-process "
                      + ", ".join(f"{s} {times[(n, s, 'in')][-1]:.1f}" for s in args.stages)
                      + " s", flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    report(med, sizes, args.stages)
    load = os.getloadavg()
    print(f"load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b > 0 else "     -"


def report(med: dict[tuple[int, str, str], float], sizes: list[int], stages: list[str]) -> None:
    target = [s for s in TARGET if s in stages]
    rows = [*stages, "total", *(["target"] if len(target) == len(TARGET) else [])]

    def t(n: int, name: str, kind: str) -> float:
        if name in ("total", "target"):
            return sum(med[(n, s, kind)] for s in (stages if name == "total" else target))
        return med[(n, name, kind)]

    for n in sizes:
        print(f"\n{n} cells       stage s   ms/cell   in-process s   ms/cell   stage / in-process")
        for name in rows:
            a, b = t(n, name, "stage"), t(n, name, "in")
            print(f"  {name:10s} {a:9.2f} {1000 * a / n:9.1f} {b:14.2f} {1000 * b / n:9.1f}   "
                  f"{_ratio(a, b)}")
    if len(sizes) < 2:
        return
    lo, hi = sizes[0], sizes[-1]
    print(f"\nmarginal per cell, {lo} -> {hi} cells (fixed costs cancel; stage fixed part = "
          f"T_{lo} - {lo} x marginal)")
    print("  stage       stage ms/cell   in-process ms/cell   ratio   stage fixed s")
    for name in rows:
        da = (t(hi, name, "stage") - t(lo, name, "stage")) / (hi - lo)
        db = (t(hi, name, "in") - t(lo, name, "in")) / (hi - lo)
        fixed = t(lo, name, "stage") - lo * da
        print(f"  {name:10s} {1000 * da:13.2f} {1000 * db:20.2f}   {_ratio(da, db)} {fixed:11.2f}")


if __name__ == "__main__":
    sys.exit(main())
