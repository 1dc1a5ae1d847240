"""The files of a cell folder, named once: every writer and reader of a cell takes its names here.

A cell's folder in the store (``<store>/cells/<training_id>/<version>/``) holds:

- :data:`MODEL` ``model.safetensors``: the tensors the cell trained
  (:mod:`pipeline.runtime.store.weights`);
- :data:`EMBEDDINGS` ``embeddings.parquet``: the final encoder's held-out views (the Parquet
  contract of :func:`pipeline.runtime.store.files.embeddings_table`), and ``snapshot(epoch)``,
  ``embeddings_e<epoch>.parquet``, those of ``stats.epochs`` (0: the untrained control);
- :data:`BACKBONE` ``backbone.parquet`` and ``backbone_snapshot(epoch)``: the same for the
  features before the head, written only for encoders that have both
  (:func:`pipeline.encoders.features.split_encoder`);
- :data:`HISTORY` ``history.parquet``: the per-epoch training history;
- :data:`RECORD` ``cell.json``: the cell's record, written last, with every other file's size and
  SHA-256 (:mod:`pipeline.runtime.store.folders`).

A new file of a cell gets its name here; ``tests/runtime/test_cell_layout.py`` fails when a
name of this module is spelled anywhere else in ``pipeline/`` or ``stages/``. Stdlib only: the
storage layer, the workers and the stages all import it.
"""

from __future__ import annotations

MODEL = "model.safetensors"
EMBEDDINGS = "embeddings.parquet"
BACKBONE = "backbone.parquet"  # beside EMBEDDINGS, for an encoder with a backbone and a head
HISTORY = "history.parquet"
RECORD = "cell.json"

FILES = (MODEL, EMBEDDINGS, BACKBONE, HISTORY, RECORD)  # every fixed name of a cell folder
REQUIRED = (MODEL, EMBEDDINGS, HISTORY, RECORD)  # what every good cell has (a record lists all
# but itself: folders.publish refuses a good record without them)
SNAPSHOTTED = (EMBEDDINGS, BACKBONE)  # the files that also have one copy per snapshot epoch

# a failed cell's ``failure_class`` in its record (:mod:`pipeline.runtime.cells.failures` decides
# which): its own computation failed, or the environment it ran in (retried on the next run)
CELL = "cell"
ENVIRONMENT = "environment"


def _at(name: str, epoch: int) -> str:
    stem, ext = name.split(".", 1)
    return f"{stem}_e{epoch:04d}.{ext}"


def snapshot(epoch: int) -> str:
    """File of the held-out embeddings at ``epoch`` (0: the untrained control)."""
    return _at(EMBEDDINGS, epoch)


def backbone_snapshot(epoch: int) -> str:
    """File of the backbone's held-out views at ``epoch`` (0: the untrained control)."""
    return _at(BACKBONE, epoch)
