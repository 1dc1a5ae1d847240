"""A model of a grid's wall time on a cluster: packing, the driver's and the store's per-cell costs.

Pure stdlib: numbers in, named results out (``bench/cluster_model.py`` reads the cell records,
measures the overheads and prints). Times are seconds, sizes bytes, bandwidths bytes per second.

A cluster of ``N`` nodes, each with ``G`` GPUs and ``P`` CPUs, runs cells that each ask for
``compute.num_gpus = 1 / cells_per_gpu`` GPUs and ``c`` CPUs (:func:`slots_per_node`). The grid's
``C`` cells, of training times ``t_i``, then take about

    wall = max(compute, driver, store) + startup

- ``compute``: the makespan of list scheduling the cells onto ``m = N · s`` slots
  (:func:`makespan`; ``s`` slots per node), each cell's time being its training time plus the
  worker's own per-cell store work (checksums, publishing: parallel, one per slot);
- ``driver``: ``C · d``, the driver's serial per-cell cost ``d`` (planning the cell against the
  store, claiming it, submitting and collecting its Ray task, logging it to MLflow, releasing
  the claim: one process, one cell after the other);
- ``store``: ``C · b / B``, the bytes every cell writes (``b``) over the store's aggregate
  bandwidth ``B`` (a shared volume or an object store, whatever the number of writers), or
  ``C / R`` where the store admits at most ``R`` cells per second (metadata operations), the
  larger of the two.

The max is the fluid picture: the three pipelines overlap, so the slowest sets the pace; the
driver's and the store's work on the first and last cells and the scheduler's latency are not
modelled (they are small against a 100 000-cell grid's minutes).

Crossover. For a large grid the makespan is close to its lower bound
``max(W / m, t_max)``, ``W = Σ t_i = C · t̄`` (list scheduling is within ``t_max`` of ``W / m``).
The driver becomes the bottleneck once ``W / (N · s) < C · d``, i.e. above

    N*_driver = t̄ / (s · d)

nodes, and only if ``C · d > t_max`` (else the longest cell sets the wall for every ``N`` past
``C / s``). Likewise the store above ``N*_store = t̄ / (s · b / B)`` (or ``t̄ · R / s``), if
``C · b / B > t_max``. Neither depends on ``C``: a grid of cells ten times shorter hits the
driver at a tenth of the nodes. :func:`crossover_nodes` gives them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORDERS = ("given", "lpt")  # list scheduling in the grid's order (what Ray does), or longest first
TERMS = ("compute", "driver", "store")  # ties go to the earlier term


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} = {value!r}: must be a finite number > 0")


def _non_negative(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} = {value!r}: must be a finite number >= 0")


def _whole(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} = {value!r}: must be a whole number >= {least}")


def check_times(times: Sequence[float], name: str = "times") -> None:
    """Every cell time finite and >= 0 (seconds); at least one cell."""
    if len(times) == 0:
        raise ValueError(f"{name} is empty: give at least one cell's time (seconds)")
    for i, t in enumerate(times):
        _non_negative(f"{name}[{i}]", t)


def slots_per_node(gpus: int, cells_per_gpu: float, cpus: float, cpus_per_cell: float) -> int:
    """How many cells one node runs at once, as Ray packs them.

    gpus: GPUs per node (0: a CPU node). cells_per_gpu: ``1 / compute.num_gpus``; at least 1
    (``num_gpus <= 1``), each GPU holds ``floor(cells_per_gpu)`` cells (a fractional task never
    spans two GPUs: 0.4 GPUs per cell packs 2); below 1 a cell takes ``1 / cells_per_gpu``
    whole GPUs (Ray's rule above 1 GPU), so a node holds ``floor(gpus · cells_per_gpu)``.
    cpus, cpus_per_cell: the node's CPUs and ``compute.num_cpus``; a node runs at most
    ``floor(cpus / cpus_per_cell)`` cells whatever its GPUs.
    """
    _whole("gpus", gpus, 0)
    _positive("cells_per_gpu", cells_per_gpu)
    _positive("cpus", cpus)
    _positive("cpus_per_cell", cpus_per_cell)
    if cells_per_gpu < 1 and not math.isclose(1 / cells_per_gpu, round(1 / cells_per_gpu)):
        raise ValueError(f"cells_per_gpu = {cells_per_gpu!r}: below 1 a cell takes whole GPUs "
                         "(compute.num_gpus above 1 is a whole number), so it must be 1/k "
                         "(0.5, 0.25, ...), or >= 1")
    by_cpu = math.floor(cpus / cpus_per_cell + 1e-9)
    if gpus == 0:
        return by_cpu
    if cells_per_gpu >= 1:
        by_gpu = gpus * math.floor(cells_per_gpu + 1e-9)
    else:
        by_gpu = math.floor(gpus * cells_per_gpu + 1e-9)
    return min(by_gpu, by_cpu)


def makespan(times: Sequence[float], slots: int, order: str = "given") -> float:
    """Seconds until the last of ``times`` finishes when each cell, in turn, starts on the slot
    that frees first (Graham's list scheduling; ties: the lowest slot).

    order: ``given`` (the grid's order, as Ray hands out tasks submitted at once: within
    ``(2 - 1/m)`` of the optimum) or ``lpt`` (longest first: within ``4/3 - 1/(3m)``).
    """
    check_times(times)
    _whole("slots", slots, 1)
    if order not in ORDERS:
        raise ValueError(f"order = {order!r}: allowed {', '.join(ORDERS)}")
    queue = sorted(times, reverse=True) if order == "lpt" else list(times)
    if slots >= len(queue):
        return float(max(queue))
    free = [0.0] * slots  # a heap of the times at which each slot frees
    for t in queue:
        heapq.heapreplace(free, free[0] + t)
    return float(max(free))


@dataclass(frozen=True)
class Overheads:
    """The framework's per-cell costs (seconds, bytes, bytes per second).

    driver_per_cell: the driver's serial seconds per cell. worker_store_per_cell: seconds a
    worker spends per cell on the store after training (checksums, publish), in parallel.
    bytes_per_cell: what one cell writes to the store. store_bandwidth: the store's aggregate
    write bandwidth (0: unlimited). store_cells_per_second: the most cells the store publishes
    per second (0: unlimited). startup: once per run (Ray start, workers' imports).
    """

    driver_per_cell: float
    worker_store_per_cell: float = 0.0
    bytes_per_cell: float = 0.0
    store_bandwidth: float = 0.0
    store_cells_per_second: float = 0.0
    startup: float = 0.0

    def __post_init__(self) -> None:
        for name in ("driver_per_cell", "worker_store_per_cell", "bytes_per_cell",
                     "store_bandwidth", "store_cells_per_second", "startup"):
            _non_negative(name, getattr(self, name))

    @property
    def store_per_cell(self) -> float:
        """The store's seconds per cell, all writers together: the larger of bytes over
        bandwidth and one over the cell rate (0 when both are unlimited)."""
        by_bytes = self.bytes_per_cell / self.store_bandwidth if self.store_bandwidth else 0.0
        by_rate = 1 / self.store_cells_per_second if self.store_cells_per_second else 0.0
        return max(by_bytes, by_rate)


@dataclass(frozen=True)
class Prediction:
    """One cluster size's estimate (seconds): nodes, slots (cells at once), the three terms,
    wall (the largest plus startup) and which term it is (:data:`TERMS`)."""

    nodes: int
    slots: int
    compute: float
    driver: float
    store: float
    wall: float
    bottleneck: str


def predict(times: Sequence[float], nodes: int, per_node: int, overheads: Overheads,
            order: str = "given") -> Prediction:
    """The wall time of the cells ``times`` (training seconds) on ``nodes`` nodes of
    ``per_node`` slots each (:func:`slots_per_node`): see the module docstring."""
    _whole("nodes", nodes, 1)
    _whole("per_node", per_node, 1)
    check_times(times)
    extra = overheads.worker_store_per_cell
    work = [t + extra for t in times] if extra else times
    slots = nodes * per_node
    terms = {"compute": makespan(work, slots, order),
             "driver": len(times) * overheads.driver_per_cell,
             "store": len(times) * overheads.store_per_cell}
    top = max(TERMS, key=lambda k: (terms[k], -TERMS.index(k)))
    return Prediction(nodes, slots, terms["compute"], terms["driver"], terms["store"],
                      terms[top] + overheads.startup, top)


@dataclass(frozen=True)
class Crossover:
    """Nodes above which the driver (store) is slower than the compute; None: never (the
    longest cell outlasts all the driver's (store's) work, or its cost is 0)."""

    driver: float | None
    store: float | None


def crossover_nodes(times: Sequence[float], per_node: int, overheads: Overheads) -> Crossover:
    """``N* = t̄ / (s · cost)`` for the driver's and the store's per-cell cost, where it exists
    (``C · cost > t_max``): the fluid bound ``W / (N · s)`` meets ``C · cost``. ``t̄`` and
    ``t_max`` include the worker's store seconds per cell."""
    check_times(times)
    _whole("per_node", per_node, 1)
    cells, extra = len(times), overheads.worker_store_per_cell
    mean, longest = sum(times) / cells + extra, max(times) + extra

    def at(cost: float) -> float | None:
        return mean / (per_node * cost) if cost > 0 and cells * cost > longest else None

    return Crossover(at(overheads.driver_per_cell), at(overheads.store_per_cell))


@dataclass(frozen=True)
class CellCost:
    """What one cell record says it cost: training seconds and the bytes of its files."""

    seconds: float
    bytes: int


def cell_costs(records: Sequence[Mapping[str, Any]]) -> list[CellCost]:
    """The ok cells' ``wall_seconds`` and the sum of their ``files``' ``bytes``, from their
    ``cell.json`` records (:mod:`pipeline.runtime.store.folders`); failed cells are left out."""
    out = []
    for r in records:
        if r.get("status") != "ok" or "wall_seconds" not in r:
            continue
        files = r.get("files") or {}
        out.append(CellCost(float(r["wall_seconds"]),
                            sum(int(f.get("bytes", 0)) for f in files.values())))
    return out
