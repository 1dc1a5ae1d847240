"""``cbench verify``: retrain done cells from their records and check that they reproduce.

A published number is only as good as the chance that someone else gets it again. This retrains
a sample of the grid's done cells (or the ones named) in this process, with the code of this
checkout, on the dataset the workspace prepared, into a scratch folder, and compares what it got
with the stored cell: the held-out embeddings (both views) and the headline statistics computed
from them, each within the tolerance stated in :data:`TOLERANCES`. The tolerances are for another
machine: BLAS kernels differ between CPUs (MKL on Intel and AMD), so a float result agrees to
about 1e-6 relative per operation and drifts over a training; on the machine that trained the
cell, the differences are 0 or at rounding level.

Each check is written to the cell store beside the cell (``<store>/verify/<training id>/
<version>.json``, :func:`pipeline.runtime.store.folders.verify_record_path`), so every workspace
that uses the cell sees it; the report stage marks reproduced cells and ``cells.csv`` carries the
result.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.datasets import Dataset
from pipeline.grid import Cell
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.store import files, layout
from pipeline.runtime.store.files import Location
from pipeline.runtime.store.folders import verify_record_path
from pipeline.stats import alignment, anderson_darling, thin_shell_cv, uniformity


@dataclass(frozen=True)
class Tolerance:
    """|retrained − stored| <= atol + rtol·|stored| counts as agreement."""

    atol: float
    rtol: float
    what: str

    def agrees(self, stored: float, retrained: float) -> bool:
        if not (np.isfinite(stored) and np.isfinite(retrained)):
            return bool(np.isnan(stored) and np.isnan(retrained))
        return abs(retrained - stored) <= self.atol + self.rtol * abs(stored)


# What "the same cell" means, per compared quantity (see the module docstring for why not 0).
TOLERANCES: dict[str, Tolerance] = {
    "embeddings": Tolerance(0.0, 1e-3, "‖Z' − Z‖_F / ‖Z‖_F of the held-out embeddings, both views"),
    "final_loss": Tolerance(1e-4, 1e-3, "the last epoch's mean training loss"),
    "cv": Tolerance(1e-3, 1e-2, "thin-shell CV of the clean held-out embeddings"),
    "ad_mean": Tolerance(0.05, 0.02, "mean Anderson-Darling A² over the coordinates"),
    "alignment": Tolerance(1e-3, 1e-2, "E‖u − v‖² between the two views (unit rows)"),
    "uniformity": Tolerance(1e-3, 1e-2, "log E exp(−2‖u − u'‖²) (unit rows)"),
}


@dataclass(frozen=True)
class Check:
    """One quantity of one cell: the stored value, the retrained one, and whether they agree."""

    name: str
    stored: float
    retrained: float
    agrees: bool


@dataclass(frozen=True)
class Verification:
    """The result for one done cell; ``reproduced`` when every check agrees."""

    cell_id: str
    training_id: str
    version: str
    reproduced: bool
    checks: tuple[Check, ...]
    seconds: float
    error: str = ""

    def as_record(self) -> dict[str, Any]:
        return {**asdict(self), "checks": [asdict(c) for c in self.checks],
                "tolerances": {k: asdict(t) for k, t in TOLERANCES.items()},
                "checked_at": round(time.time(), 3)}


def _headline(z0: np.ndarray, z1: np.ndarray) -> dict[str, float]:
    z0, z1 = z0.astype(np.float64), z1.astype(np.float64)
    u0 = z0 / np.linalg.norm(z0, axis=1, keepdims=True)
    u1 = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    return {"cv": thin_shell_cv(z0), "ad_mean": float(np.mean(anderson_darling(z0))),
            "alignment": alignment(u0, u1), "uniformity": uniformity(u0)}


def _views(folder: Location) -> tuple[np.ndarray, np.ndarray]:
    path = files.location(folder) / layout.EMBEDDINGS
    return files.read_embeddings(path, 0), files.read_embeddings(path, 1)


def compare(stored: Location, retrained: Location) -> list[Check]:
    """The checks of :data:`TOLERANCES` between two folders of one cell."""
    (a0, a1), (b0, b1) = _views(stored), _views(retrained)
    checks = []
    a, b = np.concatenate([a0, a1]).astype(np.float64), np.concatenate([b0, b1]).astype(np.float64)
    scale = max(float(np.linalg.norm(a)), 1e-300)
    drift = float(np.linalg.norm(b - a)) / scale if a.shape == b.shape else float("inf")
    checks.append(Check("embeddings", 0.0, drift, TOLERANCES["embeddings"].agrees(0.0, drift)))
    loss = [files.read_json(files.location(f) / layout.RECORD).get("final_loss") for f in
            (stored, retrained)]
    if loss[0] is not None and loss[1] is not None:
        tol = TOLERANCES["final_loss"]
        checks.append(Check("final_loss", float(loss[0]), float(loss[1]),
                            tol.agrees(float(loss[0]), float(loss[1]))))
    if a.shape == b.shape:
        mine, theirs = _headline(a0, a1), _headline(b0, b1)
        for name, value in mine.items():
            tol = TOLERANCES[name]
            checks.append(Check(name, value, theirs[name], tol.agrees(value, theirs[name])))
    return checks


def verify_cell(cell: Cell, folder: Location, version: str, dataset: Dataset,
                meta: Mapping[str, Any], threads: int = 1,
                scratch: Path | None = None) -> Verification:
    """Retrain ``cell`` into a scratch folder and compare it with its stored ``folder``."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cbench-verify-", dir=scratch) as tmp:
        out = run_cell(cell, dataset, Path(tmp) / "cell", meta, threads)
        if out.status != "ok":
            return Verification(cell.cell_id, cell.training_id, version, False, (),
                                time.perf_counter() - start,
                                f"retraining failed: {out.reason.splitlines()[0]}")
        checks = tuple(compare(folder, Path(tmp) / "cell"))
    return Verification(cell.cell_id, cell.training_id, version, all(c.agrees for c in checks),
                        checks, time.perf_counter() - start)


def sample(rows: Sequence[Mapping[str, Any]], n: int, seed: int) -> list[Mapping[str, Any]]:
    """``n`` done rows, one per training, drawn without replacement by ``seed`` (grid order)."""
    done: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if row.get("status") == "ok":
            done.setdefault(str(row.get("training_id") or row["cell_id"]), row)
    pool = list(done.values())
    if n >= len(pool):
        return pool
    pick = np.random.default_rng(seed).choice(len(pool), size=n, replace=False)
    return [pool[i] for i in sorted(pick)]


def verify_grid(params: Any, rows: Sequence[Mapping[str, Any]], store: Location,
                dataset: Dataset, chosen: Sequence[Mapping[str, Any]],
                threads: int = 1) -> list[Verification]:
    """Retrain the ``chosen`` manifest rows' cells (of ``params``'s grid) and record each check
    in the store (:func:`pipeline.runtime.store.folders.verify_record_path`)."""
    from tqdm import tqdm

    from pipeline.config import expand

    cells = {c.cell_id: c for c in expand(params)}
    out = []
    for row in tqdm(chosen, desc="verify", unit="cell"):
        cell = cells[str(row["cell_id"])]
        folder = files.location(str(row["path"]))
        record = files.read_json(folder / layout.RECORD)
        ran = record.get("compute") or {}
        if "auto" in (cell.train.precision, cell.train.memory_format) and ran:
            cell = replace(cell, train=replace(cell.train, precision=ran["precision"],
                                               memory_format=ran["memory_format"]))
        meta = {k: record[k] for k in ("git_sha", "dataset_hash", "code_version", "version",
                                       "code_fingerprint") if k in record}
        result = verify_cell(cell, folder, str(row["version"]), dataset, meta, threads)
        files.atomic_write_json(verify_record_path(store, cell.training_id, str(row["version"])),
                                  result.as_record())
        out.append(result)
    return out


def to_markdown(results: Sequence[Verification]) -> str:
    """One row per compared quantity of each cell: stored, retrained, agreement."""
    lines = ["| cell | training | quantity | stored | retrained | tolerance | agrees |",
             "|---|---|---|---:|---:|---|:---:|"]
    for r in results:
        if r.error:
            lines.append(f"| {r.cell_id} | {r.training_id} | – | – | – | – | no: {r.error} |")
        for c in r.checks:
            t = TOLERANCES[c.name]
            lines.append(f"| {r.cell_id} | {r.training_id} | {c.name} | {c.stored:.6g} | "
                         f"{c.retrained:.6g} | atol {t.atol:g}, rtol {t.rtol:g} | "
                         f"{'yes' if c.agrees else '**no**'} |")
    ok = sum(r.reproduced for r in results)
    lines.append(f"\n{ok} of {len(results)} cells reproduced within the tolerances "
                 "(the embeddings' relative difference is reported as 'retrained').")
    return "\n".join(lines) + "\n"
