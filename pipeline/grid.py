"""The benchmark grid: its axes, its cells and their stable ids, as plain frozen dataclasses.

This is what the training path sees of the configuration (no yaml, no pydantic): the params
schema (:mod:`pipeline.config`) validates ``params.yaml`` and hands over these objects.

- :class:`GridPoint` holds one value of every grid axis; :data:`GRID_AXES` is the one list of the
  axes (``params.grid`` has one list per axis, every combination is one cell).
- :class:`Cell` is a grid point with everything else that determines its training run: the
  resolved options of its loss, schedule and encoder, the training settings and the data.
- A cell's id is 12 hex digits of SHA-256 over the canonical JSON of :meth:`Cell.config`.
- A cell's *training id* is the same hash over :meth:`Cell.training_config`: the config with the
  keys its training does not read blanked (a loss without negatives reads no k). Cells that
  differ only there share one training (one folder in the cell store, one MLflow run, the same
  random streams) and are each evaluated at their own values. Where a cell's training reads every
  key, its training id is its cell id.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class GridPoint:
    """One value of each grid axis."""

    objective: str  # contrastive | supervised (cross-entropy on labels, same encoder)
    loss: str
    k: int  # negatives per anchor
    tau: float  # temperature (the schedule's target)
    tau_schedule: str
    n: int  # training-set size
    arch: str
    embed_dim: int
    batch_size: int
    seed: int


GRID_AXES: tuple[str, ...] = tuple(f.name for f in fields(GridPoint))


@dataclass(frozen=True)
class DataSpec:
    """The dataset, its options and its augmentation (every option filled in)."""

    name: str
    n_train: int
    n_heldout: int
    seed: int
    options: Mapping[str, Any]
    augment: Mapping[str, Any]


@dataclass(frozen=True)
class TrainSpec:
    """A cell's training settings: params ``train:`` plus the cell's batch size.

    ``threads`` and ``on_code_change`` are how a cell is run, not what it computes: they are left
    out of :meth:`Cell.config` and so of its id.
    """

    epochs: int  # 0: export the initial (or frozen pretrained) encoder only
    lr: float
    optimizer: str  # adam | sgd
    negatives: str  # independent | in_batch
    threads: int
    device: str  # auto | cpu | cuda
    precision: str  # float32 | bfloat16 | auto
    memory_format: str  # contiguous | channels_last | auto
    deterministic: bool  # torch.use_deterministic_algorithms while the cell trains
    on_code_change: str  # retrain | keep | fail
    batch_size: int


RUN_ONLY_TRAIN_KEYS = frozenset({"threads", "on_code_change"})
# what a cell is run with on a node with / without a GPU when ``train.device`` is ``auto``
AUTO_DEVICE = {True: "cuda", False: "cpu"}


def concrete_device(device: str, gets_gpu: bool) -> str:
    """``train.device`` as it runs: ``auto`` is CUDA exactly when the cell's task is given a GPU
    (``compute.num_gpus > 0``: Ray hides every GPU from a task that asks for none)."""
    return AUTO_DEVICE[gets_gpu] if device == "auto" else device


@dataclass(frozen=True)
class Cell(GridPoint):
    """One grid cell: everything that determines its training run, and its stable id.

    Supervised cells ignore the contrastive axes: their loss is ``cross_entropy`` and k, τ are 0,
    so the grid holds one supervised cell per (n, arch, embed_dim, batch_size, seed).
    """

    cell_id: str
    loss_options: Mapping[str, Any]
    schedule_options: Mapping[str, Any]
    arch_options: Mapping[str, Any]
    train: TrainSpec  # train: with this cell's batch size
    data: DataSpec
    unread: tuple[str, ...] = ()  # config keys (dotted) that its training does not read
    training_id: str = ""  # hash of training_config(); == cell_id when unread is empty

    def config(self) -> dict[str, Any]:
        """The resolved cell config (JSON-ready); its hash is the cell id.

        The batch size is part of ``train`` (not a top-level key), as it was before it became a
        grid axis, so the ids of cells trained then did not change.
        """
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if f.name not in NOT_CONFIG}
        train = {k: v for k, v in asdict(self.train).items() if k not in RUN_ONLY_TRAIN_KEYS}
        out.update(loss_options=dict(self.loss_options), arch_options=dict(self.arch_options),
                   schedule_options=dict(self.schedule_options), train=train,
                   data={**asdict(self.data), "options": dict(self.data.options),
                         "augment": dict(self.data.augment)})
        return out

    def training_config(self) -> dict[str, Any]:
        """:meth:`config` with every key of ``unread`` set to None: what the training reads."""
        out = self.config()
        for key in self.unread:
            *path, last = key.split(".")
            node = out
            for part in path:
                node = node[part]
            node[last] = None
        return out

    def grid_values(self) -> dict[str, Any]:
        """The cell's value on every grid axis (:data:`GRID_AXES` order)."""
        return {axis: getattr(self, axis) for axis in GRID_AXES}


NOT_CONFIG = frozenset({"cell_id", "batch_size", "unread", "training_id"})


def cell_id_of(config: Mapping[str, Any]) -> str:
    """12 hex digits of SHA-256 over the canonical JSON of the resolved cell config."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class GridSpec:
    """What :func:`expand` needs: the axes' values and the resolved option sets.

    ``schedule_options(schedule, tau)`` gives the schedule's options with the grid's τ as its
    target (the config layer has checked every combination before any cell is built).
    """

    axes: Mapping[str, tuple[Any, ...]]  # axis name -> its values, for every name in GRID_AXES
    loss_options: Mapping[str, Mapping[str, Any]]
    arch_options: Mapping[str, Mapping[str, Any]]
    schedule_options: Callable[[str, float], Mapping[str, Any]]
    train: Mapping[str, Any]  # params train: (every key of TrainSpec but batch_size)
    data: DataSpec
    # (objective, loss) -> the config keys that training does not read (see Cell.unread)
    unread: Callable[[str, str], tuple[str, ...]] = lambda objective, loss: ()


SUPERVISED = {"loss": "cross_entropy", "k": 0, "tau": 0.0, "tau_schedule": "none"}


def make_cell(spec: GridSpec, point: Mapping[str, Any]) -> Cell:
    """The cell of one grid point (supervised points drop their contrastive axes)."""
    values = dict(point)
    if values["objective"] == "supervised":
        values.update(SUPERVISED)
        loss_opts: Mapping[str, Any] = {}
        sched_opts: Mapping[str, Any] = {}
    else:
        loss_opts = spec.loss_options[values["loss"]]
        sched_opts = spec.schedule_options(values["tau_schedule"], values["tau"])
    train = TrainSpec(**spec.train, batch_size=values["batch_size"])
    fields_: dict[str, Any] = dict(values, loss_options=dict(loss_opts),
                                   schedule_options=dict(sched_opts),
                                   arch_options=dict(spec.arch_options[values["arch"]]),
                                   train=train, data=spec.data,
                                   unread=tuple(spec.unread(values["objective"], values["loss"])))
    probe = Cell(cell_id="", **fields_)
    return Cell(cell_id=cell_id_of(probe.config()),
                training_id=cell_id_of(probe.training_config()), **fields_)


def points(axes: Mapping[str, Iterable[Any]]) -> Iterable[dict[str, Any]]:
    """Every combination of the axes' values, in a stable order (the first axis varies slowest)."""
    for combo in itertools.product(*(tuple(axes[a]) for a in GRID_AXES)):
        yield dict(zip(GRID_AXES, combo, strict=True))


def expand(spec: GridSpec) -> list[Cell]:
    """Every cell of the grid, in a stable order, without duplicates (supervised points
    collapse)."""
    cells: dict[str, Cell] = {}
    for point in points(spec.axes):
        cell = make_cell(spec, point)
        cells.setdefault(cell.cell_id, cell)
    return list(cells.values())
