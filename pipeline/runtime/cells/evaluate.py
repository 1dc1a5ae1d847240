"""A cell's encoders read back from its folder, for the evaluations that need them.

The evaluations themselves are pure (:mod:`pipeline.search.cell`, :mod:`pipeline.bounds.cell`,
the probes); this is their one piece of I/O: the saved weights (``model.safetensors``) into the
cell's architecture, and the same architecture at its initial weights, rebuilt exactly (they are
seeded: :func:`pipeline.train.initial_encoder`).
"""

from __future__ import annotations

from torch import nn

from pipeline.datasets import Dataset
from pipeline.grid import Cell
from pipeline.runtime.store import files, layout, weights
from pipeline.train import initial_encoder


def load_encoders(cell: Cell, dataset: Dataset, folder: files.Location) -> dict[str, nn.Module]:
    """``{"trained": the saved encoder, "initial": the same architecture at its seeded init}``,
    both in eval mode; ``folder``: the cell's folder in the store (a path or a storage URI)."""
    trained = initial_encoder(cell, dataset.input_shape)
    weights.load_into(trained, files.read_bytes(files.location(folder) / layout.MODEL), cell)
    return {"trained": trained.eval(), "initial": initial_encoder(cell, dataset.input_shape).eval()}
