"""Ray: one task per cell, submitted at once, collected as they finish (with a progress bar).

Shared inputs (the dataset) go to the object store once. Application errors are never retried
(``run_cell`` records them); ``max_retries`` only covers lost workers and nodes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from tqdm import tqdm

from pipeline.config import Cell, ComputeConfig
from pipeline.datasets import Dataset
from pipeline.plugins import load_plugins
from pipeline.runtime.cells import CellOutcome, run_cell

LOOPBACK = "127.0.0.1"


def loopback_only() -> None:
    """Make a local Ray instance bind every server to 127.0.0.1.

    Ray replaces a loopback ``node_ip_address`` by the machine's external address unless it runs
    in single-machine mode, the mode it uses on macOS and Windows. The flag is read from the
    environment by the processes Ray starts, and was read at import time by this one.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False


def ray_address(compute: ComputeConfig) -> str | None:
    """The Ray cluster to use: ``compute.ray_address``, else ``RAY_ADDRESS``; None: run locally."""
    return compute.ray_address or os.environ.get("RAY_ADDRESS") or None


def init_ray(compute: ComputeConfig) -> None:
    """Connect to :func:`ray_address`, else start a local instance on 127.0.0.1."""
    if ray.is_initialized():
        return
    address = ray_address(compute)
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        loopback_only()
        # address="local": always a new instance, never a cluster another process started here
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
                 log_to_driver=False, _node_ip_address=LOOPBACK)


def _task(cell: Cell, dataset: Dataset, folder: str, meta: Mapping[str, Any], threads: int,
          snapshot_epochs: Sequence[int], plugins: Sequence[str]) -> CellOutcome:
    load_plugins(plugins)  # a worker process registers the user's losses before training
    return run_cell(cell, dataset, folder, meta, threads, snapshot_epochs)


def run_cells(cells: Sequence[Cell], dataset: Dataset, folders: Mapping[str, str | Path],
              metas: Mapping[str, Mapping[str, Any]], compute: ComputeConfig, threads: int,
              snapshot_epochs: Sequence[int], on_done: Callable[[CellOutcome], None],
              plugins: Sequence[str] = ()) -> list[CellOutcome]:
    """Run every cell as a Ray task writing to its folder; ``on_done`` is called in the driver as
    each one finishes. ``metas``: each cell's record fields (git commit, version, fingerprint)."""
    if not cells:
        return []
    init_ray(compute)
    remote = ray.remote(num_cpus=compute.num_cpus, num_gpus=compute.num_gpus,
                        max_retries=compute.max_retries, retry_exceptions=False)(_task)
    data_ref = ray.put(dataset)
    by_ref = {remote.remote(c, data_ref, str(folders[c.cell_id]), metas[c.cell_id], threads,
                            list(snapshot_epochs),
                            [str(Path(p).resolve()) if p.endswith(".py") else p for p in plugins]): c
              for c in cells}
    pending = list(by_ref)
    outcomes = []
    with tqdm(total=len(pending), desc="cells", unit="cell") as bar:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                outcome = ray.get(ready[0])
            except ray.exceptions.RayError as err:  # worker lost beyond max_retries, etc.
                cell = by_ref[ready[0]]
                outcome = CellOutcome(cell.cell_id, "failed", f"{type(err).__name__}: {err}"[:2000])
            on_done(outcome)
            outcomes.append(outcome)
            bar.set_postfix_str(f"last {outcome.cell_id} {outcome.status}")
            bar.update(1)
    return outcomes
