"""Train one grid cell: config and data in, encoder and history out. Pure torch, no I/O.

Random streams (all from :mod:`pipeline.seeding`):
- initial weights: (seed, arch, its options, input and embedding dims) — cells that differ only
  in loss, k or τ start from the same weights, so their comparison is paired;
- the training subsample of size n: (seed, n);
- batches, augmentations and negatives: (seed, cell_id);
- the held-out positive views: the data seed alone, so every cell is scored on the same views.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from pipeline.config import Cell, DataConfig
from pipeline.datasets import augment
from pipeline.encoders import build_encoder
from pipeline.losses import LOSSES, LossBatch, in_batch_negatives
from pipeline.seeding import numpy_generator, seeded_init, torch_generator


class DivergedError(RuntimeError):
    """The loss became NaN or infinite: the cell is recorded as failed with this message."""


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    loss: float
    seconds: float


@dataclass(frozen=True)
class TrainResult:
    model: nn.Module
    history: list[EpochRecord]
    train_indices: np.ndarray  # rows of the training set this cell saw, (n,)


def initial_encoder(cell: Cell, input_dim: int) -> nn.Module:
    """The cell's encoder at initialisation (epoch 0)."""
    opts = sorted(cell.arch_options.items())
    with seeded_init(cell.seed, cell.arch, opts, input_dim, cell.embed_dim, "init"):
        return build_encoder(cell.arch, input_dim, cell.embed_dim, cell.arch_options)


def subsample(cell: Cell, n_train: int) -> np.ndarray:
    """The n training rows of this cell: shared by all cells with the same (seed, n)."""
    rng = numpy_generator(cell.seed, cell.n, "subsample")
    return np.sort(rng.choice(n_train, size=cell.n, replace=False))


def _view(x: Tensor, data: DataConfig, gen: torch.Generator) -> Tensor:
    return augment(x, data.channel_a, data.noise_std, data.dropout, data.scale_std, gen)


def _loss_batch(model: nn.Module, x: Tensor, xb: Tensor, cell: Cell, gen: torch.Generator) -> LossBatch:
    """Encode two views of the batch and its negatives (independent draws or in-batch picks)."""
    z1 = model(_view(xb, cell.data, gen))
    z2 = model(_view(xb, cell.data, gen))
    negatives = None
    if LOSSES[cell.loss].needs_negatives:
        b = xb.shape[0]
        if cell.train.negatives == "independent":
            idx = torch.randint(x.shape[0], (b * cell.k,), generator=gen)
            negatives = model(_view(x[idx], cell.data, gen)).reshape(b, cell.k, -1)
        else:
            negatives = in_batch_negatives(z2, cell.k, gen)
    return LossBatch(anchor=z1, positive=z2, negatives=negatives)


def train_cell(cell: Cell, x_train: np.ndarray) -> TrainResult:
    """Train the cell's encoder with its loss; raises :class:`DivergedError` on a non-finite loss."""
    rows = subsample(cell, x_train.shape[0])
    x = torch.from_numpy(np.ascontiguousarray(x_train[rows]))
    model = initial_encoder(cell, x.shape[1])
    opt_cls = torch.optim.Adam if cell.train.optimizer == "adam" else torch.optim.SGD
    optimizer = opt_cls(model.parameters(), lr=cell.train.lr)
    spec = LOSSES[cell.loss]
    gen = torch_generator(cell.seed, cell.cell_id, "train")
    bs = cell.train.batch_size
    history = []
    for epoch in range(1, cell.train.epochs + 1):
        start, total, steps = time.perf_counter(), 0.0, 0
        order = torch.randperm(x.shape[0], generator=gen)
        for first in range(0, x.shape[0] - bs + 1, bs):  # drop the last partial batch
            batch = _loss_batch(model, x, x[order[first:first + bs]], cell, gen)
            loss = spec.fn(batch, cell.tau, cell.loss_options)
            if not torch.isfinite(loss):
                raise DivergedError(f"loss is {loss.item()} at epoch {epoch}, step {steps + 1}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
        history.append(EpochRecord(epoch, total / steps, time.perf_counter() - start))
    return TrainResult(model=model, history=history, train_indices=rows)


@torch.no_grad()
def embed_heldout(model: nn.Module, x_heldout: np.ndarray, data: DataConfig) -> tuple[np.ndarray, np.ndarray]:
    """Raw embeddings of the clean held-out inputs (view 0) and of one augmented view (view 1)."""
    model.eval()
    x = torch.from_numpy(np.ascontiguousarray(x_heldout))
    gen = torch_generator(data.seed, "heldout-view")
    z0 = model(x)
    z1 = model(_view(x, data, gen))
    model.train()
    return z0.numpy().astype(np.float32), z1.numpy().astype(np.float32)

