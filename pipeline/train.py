"""Train one grid cell: config and data in, encoder, history and snapshots out. Pure torch, no I/O.

Random streams (all from :mod:`pipeline.seeding`):
- initial weights: (seed, arch, its options, input shape, embedding size) — cells that differ
  only in loss, k or τ start from the same weights, so their comparison is paired, and the
  untrained control of a cell is exactly its epoch-0 encoder;
- the training subsample of size n: (seed, n);
- batches, augmentations and negatives: (seed, training_id): the cell id without the keys its
  training does not read, so cells that differ only there are one training, not two seeds;
- the held-out positive views: the data seed alone, so every cell is scored on the same views.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.datasets.registry import make_augmenter
from pipeline.datasets.synthetic import Dataset
from pipeline.encoders.device import (
    ComputeMode,
    apply_compute_mode,
    cached_compute_mode,
    encoder_step,
    pick_device,
    resolve_compute_mode,
)
from pipeline.encoders.encode import ENCODE_BATCH
from pipeline.encoders.features import BACKBONE, HEAD, SPLIT_ARCHS, EncoderSplit, split_encoder
from pipeline.encoders.registry import make_encoder
from pipeline.encoders.supervised import classifier_head, supervised_loss
from pipeline.grid import Cell
from pipeline.losses.negatives import enqueue, in_batch_negatives
from pipeline.losses.registry import LOSSES, LossBatch
from pipeline.losses.schedules import LearnableTemperature, temperature_at
from pipeline.seeding import numpy_generator, seeded_init, torch_generator

Augmenter = Callable[[Tensor, torch.Generator], Tensor]


class DivergedError(RuntimeError):
    """The loss became NaN or infinite: the cell is recorded as failed with this message."""


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    loss: float
    tau_mean: float  # the temperature averaged over the epoch's steps
    seconds: float


@dataclass(frozen=True)
class TrainResult:
    model: nn.Module
    history: list[EpochRecord]
    snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    compute: ComputeMode | None = None  # the precision and memory format that trained it


@dataclass
class _State:
    """What the loop carries besides the encoder: the extra trainable parts and MoCo state."""

    model: nn.Module
    head: nn.Module | None = None  # supervised classifier
    temperature: LearnableTemperature | None = None
    momentum: nn.Module | None = None  # SynCo's key encoder
    queue: Tensor | None = None
    ptr: int = 0

    def trainable(self) -> list[nn.Parameter]:
        parts: Iterable[nn.Module | None] = (self.model, self.head, self.temperature)
        return [p for m in parts if m is not None for p in m.parameters() if p.requires_grad]


def initial_encoder(cell: Cell, input_shape: tuple[int, ...]) -> nn.Module:
    """The cell's encoder at initialisation (epoch 0)."""
    opts = sorted((k, str(v)) for k, v in cell.arch_options.items())
    with seeded_init(cell.seed, cell.arch, opts, tuple(input_shape), cell.embed_dim, "init"):
        return make_encoder(cell.arch, tuple(input_shape), cell.embed_dim, cell.arch_options)


def subsample(cell: Cell, n_train: int) -> np.ndarray:
    """The n training rows of this cell: shared by all cells with the same (seed, n)."""
    rng = numpy_generator(cell.seed, cell.n, "subsample")
    return np.sort(rng.choice(n_train, size=cell.n, replace=False))


def _initial_state(cell: Cell, dataset: Dataset, device: torch.device) -> _State:
    state = _State(model=initial_encoder(cell, dataset.input_shape).to(device))
    if cell.objective == "supervised":
        with seeded_init(cell.seed, cell.training_id, "head"):
            state.head = classifier_head(cell.embed_dim, int(dataset.n_classes or 0)).to(device)
    if cell.tau_schedule == "learnable":
        state.temperature = LearnableTemperature(**cell.schedule_options).to(device)
    opts = cell.loss_options
    if cell.loss == "synco" and opts.get("queue_size"):
        state.momentum = copy.deepcopy(state.model).requires_grad_(False)
        gen = torch_generator(cell.seed, cell.training_id, "queue")
        state.queue = F.normalize(torch.randn(opts["queue_size"], cell.embed_dim, generator=gen),
                                  dim=1).to(device)
    return state


def _tau(cell: Cell, state: _State, step: int, total: int) -> float | Tensor:
    if state.temperature is not None:
        return state.temperature()
    return temperature_at(cell.tau_schedule, step, total, cell.schedule_options)


def _contrastive(cell: Cell, state: _State, aug: Augmenter, x: Tensor, idx: Tensor,
                 y: Tensor | None, gen: torch.Generator, step: int, tau: float | Tensor) -> Tensor:
    """Encode two views of the batch and its negatives (independent draws or in-batch picks)."""
    dev = next(state.model.parameters()).device
    xb = x[idx]
    z1 = state.model(aug(xb, gen).to(dev))
    v2 = aug(xb, gen).to(dev)
    if state.momentum is not None:  # MoCo: keys from the momentum encoder, no gradient
        with torch.no_grad():
            z2 = state.momentum(v2)
    else:
        z2 = state.model(v2)
    spec, negatives = LOSSES[cell.loss], None
    if spec.needs_negatives:
        b = xb.shape[0]
        if cell.train.negatives == "independent":
            neg_idx = torch.randint(x.shape[0], (b * cell.k,), generator=gen)
            negatives = state.model(aug(x[neg_idx], gen).to(dev)).reshape(b, cell.k, -1)
        else:
            negatives = in_batch_negatives(z2, cell.k, gen)
    labels = None if y is None else y[idx].to(dev)
    similarity = (spec.similarity(xb.to(dev), labels, cell.loss_options)
                  if spec.similarity is not None else None)  # X-CLR's graph on the clean inputs
    batch = LossBatch(anchor=z1, positive=z2, negatives=negatives, labels=labels,
                      queue=state.queue, generator=gen, similarity=similarity, step=step)
    loss = spec.fn(batch, tau, cell.loss_options)
    if state.momentum is not None and state.queue is not None:
        state.queue, state.ptr = enqueue(state.queue, F.normalize(z2.detach(), dim=1), state.ptr)
    return loss


def _supervised(state: _State, aug: Augmenter, x: Tensor, idx: Tensor, y: Tensor,
                gen: torch.Generator) -> Tensor:
    dev = next(state.model.parameters()).device
    assert state.head is not None
    return supervised_loss(state.head(state.model(aug(x[idx], gen).to(dev))), y[idx].to(dev))


def _momentum_update(state: _State, m: float) -> None:
    if state.momentum is None:
        return
    with torch.no_grad():
        for pk, pq in zip(state.momentum.parameters(), state.model.parameters(), strict=True):
            pk.mul_(m).add_(pq.detach(), alpha=1.0 - m)


@contextlib.contextmanager
def deterministic_kernels(on: bool) -> Iterator[None]:
    """``train.deterministic``: only deterministic kernels while the cell trains (an op without
    one raises), as PyTorch's reproducibility notes prescribe; the caller's setting is restored."""
    if not on:
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    # cuBLAS needs a fixed workspace to be deterministic (read when CUDA initialises)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def train_cell(cell: Cell, dataset: Dataset, snapshot_epochs: Iterable[int] = ()) -> TrainResult:
    """Train the cell's encoder; raises :class:`DivergedError` on a non-finite loss.

    ``snapshot_epochs``: epochs (0 = before training) whose held-out embeddings are kept.
    ``train.deterministic``: with deterministic kernels only (:func:`deterministic_kernels`).
    """
    with deterministic_kernels(cell.train.deterministic):
        return _train_cell(cell, dataset, snapshot_epochs)


def measure_compute_mode(cell: Cell, input_shape: tuple[int, ...]) -> ComputeMode:
    """What ``auto`` precision / memory format resolves to for ``cell`` on this process's device:
    measured on its initial encoder, as :func:`train_cell` would (and cached the same way)."""
    device = pick_device(cell.train.device)
    model = initial_encoder(cell, input_shape).to(device)
    trains = any(p.requires_grad for p in model.parameters())
    return compute_mode(cell, model if trains else None, input_shape, device)


def _train_cell(cell: Cell, dataset: Dataset, snapshot_epochs: Iterable[int]) -> TrainResult:
    device = pick_device(cell.train.device)
    rows = subsample(cell, dataset.x_train.shape[0])
    x = torch.from_numpy(np.ascontiguousarray(dataset.x_train[rows]))
    y = None if dataset.y_train is None else torch.from_numpy(dataset.y_train[rows])
    state = _initial_state(cell, dataset, device)
    aug = make_augmenter(cell.data.name, cell.data.augment)
    wanted = set(snapshot_epochs)
    snapshots = {0: embed_heldout(state.model, dataset, cell)} if 0 in wanted else {}
    params = state.trainable()
    history: list[EpochRecord] = []
    mode = compute_mode(cell, state.model if params else None, dataset.input_shape, device)
    for module in (state.model, state.momentum):
        if module is not None:
            apply_compute_mode(module, mode, device)
    if not params:  # a frozen pretrained encoder without a head: export only
        return TrainResult(state.model, history, snapshots, mode)
    opt_cls = torch.optim.Adam if cell.train.optimizer == "adam" else torch.optim.SGD
    optimizer = opt_cls(params, lr=cell.train.lr)
    gen = torch_generator(cell.seed, cell.training_id, "train")
    bs = cell.train.batch_size
    per_epoch = x.shape[0] // bs
    step = 0
    for epoch in range(1, cell.train.epochs + 1):
        start, total, tau_sum = time.perf_counter(), 0.0, 0.0
        order = torch.randperm(x.shape[0], generator=gen)
        for first in range(0, per_epoch * bs, bs):  # drop the last partial batch
            idx = order[first:first + bs]
            tau = (_tau(cell, state, step, cell.train.epochs * per_epoch)
                   if cell.objective == "contrastive" else 0.0)
            if cell.objective == "supervised":
                assert y is not None
                loss = _supervised(state, aug, x, idx, y, gen)
            else:
                loss = _contrastive(cell, state, aug, x, idx, y, gen, step, tau)
            if not torch.isfinite(loss):
                raise DivergedError(f"loss is {loss.item()} at epoch {epoch}, step {step + 1}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            _momentum_update(state, float(cell.loss_options.get("momentum", 0.0)))
            tau_value = float(tau.detach()) if isinstance(tau, Tensor) else float(tau)
            total, tau_sum, step = total + loss.item(), tau_sum + tau_value, step + 1
        history.append(EpochRecord(epoch, total / per_epoch, tau_sum / per_epoch,
                                   time.perf_counter() - start))
        if epoch in wanted:
            snapshots[epoch] = embed_heldout(state.model, dataset, cell)
    return TrainResult(state.model, history, snapshots, mode)


def compute_mode(cell: Cell, model: nn.Module | None, input_shape: tuple[int, ...],
                 device: torch.device) -> ComputeMode:
    """``train.precision`` / ``train.memory_format`` for this cell; ``auto`` is measured once per
    (architecture, options, input shape, embedding size, batch size, device, threads) and
    process."""
    t = cell.train

    def resolve() -> ComputeMode:
        step = None if model is None else encoder_step(model, input_shape, t.batch_size, device)
        return resolve_compute_mode(t.precision, t.memory_format, device, step,
                                    len(input_shape) == 3, t.batch_size)

    if model is None or "auto" not in (t.precision, t.memory_format):
        return resolve()
    key = (cell.arch, tuple(sorted((k, str(v)) for k, v in cell.arch_options.items())),
           tuple(input_shape), cell.embed_dim, t.batch_size, t.precision, t.memory_format,
           str(device), torch.get_num_threads())
    return cached_compute_mode(key, resolve)


class HeldoutViews(tuple[np.ndarray, np.ndarray]):
    """(view 0, view 1): the encoder's raw float32 output ``(N, d)`` on the clean held-out inputs
    and on one view of each; ``backbone``: the same two of its backbone ``(N, h)``
    (:func:`pipeline.encoders.features.split_encoder`), None for an encoder without a head."""

    backbone: tuple[np.ndarray, np.ndarray] | None

    def __new__(cls, head: tuple[np.ndarray, np.ndarray],
                backbone: tuple[np.ndarray, np.ndarray] | None = None) -> HeldoutViews:
        out = super().__new__(cls, head)
        out.backbone = backbone
        return out


def backbone_views(views: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """The backbone's (view 0, view 1) that :func:`embed_heldout` returned with ``views``."""
    return views.backbone if isinstance(views, HeldoutViews) else None


@torch.no_grad()
def embed_heldout(model: nn.Module, dataset: Dataset, cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """Raw float32 embeddings of the clean held-out inputs (view 0) and of one view (view 1): a
    :class:`HeldoutViews`, which also carries the encoder's backbone's where it has one that
    trains, from the same forward passes (read it with :func:`backbone_views`)."""
    was_training = model.training
    model.eval()
    dev = next(iter(model.parameters()), torch.empty(0)).device
    split = (split_encoder(cell.arch, model) if cell.arch in SPLIT_ARCHS  # a plugin's: no split
             else EncoderSplit(cell.arch, None, None, model))
    aug = make_augmenter(cell.data.name, cell.data.augment)
    gen = torch_generator(cell.data.seed, "heldout-view")
    x = torch.from_numpy(np.ascontiguousarray(dataset.x_heldout))
    parts: dict[tuple[str, int], list[Tensor]] = {(n, v): [] for n in split.names for v in (0, 1)}
    for first in range(0, x.shape[0], ENCODE_BATCH):
        xb = x[first:first + ENCODE_BATCH]
        for view, inputs in ((0, xb), (1, aug(xb, gen))):
            for name, z in split(inputs.to(dev)).items():
                parts[(name, view)].append(z.float().cpu())
    model.train(was_training)
    out = {key: torch.cat(z).numpy() for key, z in parts.items()}
    # a frozen tower's features are the same in every cell and epoch (the probe stage evaluates
    # them): not carried, so that a pretrained cell stores only what it trained
    keep = BACKBONE in split.names and split.backbone_trains
    backbone = (out[(BACKBONE, 0)], out[(BACKBONE, 1)]) if keep else None
    return HeldoutViews((out[(HEAD, 0)], out[(HEAD, 1)]), backbone)
