"""Files of a cell and the tables of the stages: Parquet schemas and atomic writes.

Every write goes to a temporary name in the same folder and is renamed into place, so a reader
(or a resumed run) never sees a half-written file. A cell is done when its ``cell.json`` exists
with ``status: ok``; it is written last.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (registers pa.compute)
import pyarrow.parquet as pq

from pipeline.datasets import Dataset

CELL_FILES = ("model.safetensors", "embeddings.parquet", "history.parquet", "cell.json")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def write_table(table: pa.Table, path: str | Path) -> None:
    """Parquet with dictionary encoding off for floats (5× faster writes, smaller files here)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=[f.name for f in table.schema
                                                if not pa.types.is_floating(f.type)
                                                and not pa.types.is_fixed_size_list(f.type)])
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def write_frame(df: pd.DataFrame, path: str | Path) -> None:
    write_table(pa.Table.from_pandas(df, preserve_index=False), path)


def embeddings_table(views: Mapping[int, np.ndarray], labels: np.ndarray | None,
                     metadata: Mapping[str, str]) -> pa.Table:
    """DESIGN.md contract: sample_id int64, label int32 (nullable), view int8, z fixed_size_list<float32>[d]."""
    parts = []
    for view, z in sorted(views.items()):
        n, d = z.shape
        flat = pa.array(np.ascontiguousarray(z, dtype=np.float32).reshape(-1), type=pa.float32())
        parts.append(pa.table({
            "sample_id": pa.array(np.arange(n, dtype=np.int64)),
            "label": pa.array(labels, type=pa.int32()) if labels is not None
            else pa.nulls(n, type=pa.int32()),
            "view": pa.array(np.full(n, view, dtype=np.int8)),
            "z": pa.FixedSizeListArray.from_arrays(flat, d),
        }))
    table = pa.concat_tables(parts)
    return table.replace_schema_metadata({k: str(v) for k, v in metadata.items()})


def read_embeddings(path: str | Path, view: int) -> np.ndarray:
    """The ``(N, d)`` float32 matrix of one view, in sample_id order."""
    table = pq.read_table(path, columns=["sample_id", "view", "z"], filters=[("view", "=", view)])
    table = table.sort_by("sample_id")
    z = table.column("z").combine_chunks()
    d = z.type.list_size
    return z.flatten().to_numpy(zero_copy_only=False).reshape(-1, d)


def read_metadata(path: str | Path) -> dict[str, str]:
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def cell_dir(root: str | Path, cell_id: str) -> Path:
    return Path(root) / cell_id


def snapshot_name(epoch: int) -> str:
    """File of the held-out embeddings at ``epoch`` (0: the untrained control)."""
    return f"embeddings_e{epoch:04d}.parquet"


def cell_done(root: str | Path, cell_id: str, snapshot_epochs: Sequence[int] = ()) -> bool:
    """Finished with status ok and every requested snapshot present."""
    folder = cell_dir(root, cell_id)
    return cell_status(root, cell_id) == "ok" and all(
        (folder / snapshot_name(e)).exists() for e in snapshot_epochs)


def cell_status(root: str | Path, cell_id: str) -> str | None:
    """'ok', 'failed', or None when the cell has no complete record."""
    path = cell_dir(root, cell_id) / "cell.json"
    if not path.exists():
        return None
    try:
        return str(read_json(path).get("status"))
    except (json.JSONDecodeError, OSError):
        return None


def _split_table(split: str, x: np.ndarray, y: np.ndarray | None) -> pa.Table:
    n = x.shape[0]
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(n, -1)
    return pa.table({
        "split": pa.array([split] * n),
        "label": pa.array(y, type=pa.int32()) if y is not None else pa.nulls(n, type=pa.int32()),
        "x": pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), type=pa.float32()),
                                               flat.shape[1]),
    })


def write_dataset(ds: Dataset, path: str | Path) -> None:
    """Both splits in one file: split, label int32 (nullable), x fixed_size_list<float32>.

    Images are stored flattened; the metadata keeps ``input_shape`` to restore them.
    """
    table = pa.concat_tables([_split_table("train", ds.x_train, ds.y_train),
                              _split_table("heldout", ds.x_heldout, ds.y_heldout)])
    meta = {"name": ds.name, "dataset_hash": ds.content_hash(),
            "input_shape": json.dumps(list(ds.input_shape)),
            "n_classes": json.dumps(ds.n_classes)}
    write_table(table.replace_schema_metadata(meta), path)


def read_dataset(path: str | Path) -> Dataset:
    table = pq.read_table(path)
    meta = read_metadata(path)
    shape = tuple(json.loads(meta["input_shape"]))
    parts = {}
    for split in ("train", "heldout"):
        part = table.filter(pa.compute.equal(table.column("split"), split))
        x = part.column("x").combine_chunks()
        xs = x.flatten().to_numpy(zero_copy_only=False).reshape(-1, *shape)
        labels = part.column("label")
        ys = None if labels.null_count == len(labels) else labels.to_numpy().astype(np.int64)
        parts[split] = (np.array(xs, dtype=np.float32, order="C"), ys)  # writable copy
    return Dataset(meta["name"], x_train=parts["train"][0], x_heldout=parts["heldout"][0],
                   y_train=parts["train"][1], y_heldout=parts["heldout"][1],
                   n_classes=json.loads(meta["n_classes"]))
