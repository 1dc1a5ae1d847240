"""Files of a cell and the tables of the stages: Parquet schemas and atomic writes.

Every write goes to a temporary name in the same folder and is renamed into place, so a reader
(or a resumed run) never sees a half-written file. A cell is done when its ``cell.json`` exists
with ``status: ok``; it is written last.

A cell folder is written whole in a staging folder of the writer's own (:func:`staging_dir`,
never touching another writer's) and published by :func:`pipeline.runtime.store.folders.publish`
with the primitives here: under :func:`publish_lock`, a rename onto a path where nothing is
(:func:`rename_new`), so the first good cell at a path stays there.

Paths are local paths or ``pyarrow.fs`` URIs (``s3://bucket/prefix``, ``gs://…``,
``file:///shared/…``): the cells of a cluster run live where every node can reach them
(``compute.storage``). A URI location is an :class:`ObjectPath`; ``file://`` URIs are local
paths for staging and publishing (rename and ``flock`` work there). On object stores the rename
is pyarrow's ``move`` (a copy and a delete on S3) and there is no lock: a cell is staged under
its own prefix and its files are moved to the final prefix one by one, the marker ``cell.json``
last, so a reader never takes a half-written cell for a done one, but two publishers of one
cell in the same instant are not kept apart (the cell's claim is what keeps them apart there).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (registers pa.compute)
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.datasets import Dataset


class ObjectPath(str):
    """A ``scheme://…`` location with the few ``pathlib`` habits the stages use."""

    def __truediv__(self, part: str) -> ObjectPath:
        return ObjectPath(f"{self.rstrip('/')}/{part}")

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.rstrip("/").rsplit("/", 1)[0])

    def exists(self) -> bool:
        return exists(self)

    def resolve(self) -> ObjectPath:
        return self


Location = str | Path  # a local path, or a URI (str or ObjectPath)
Dir = Path | ObjectPath  # a folder that takes `/`: what cell_dir and location return


def is_uri(path: Location) -> bool:
    return "://" in str(path)


def location(path: Location) -> Path | ObjectPath:
    """``path`` as a :class:`Path` (local) or an :class:`ObjectPath` (URI)."""
    return ObjectPath(str(path)) if is_uri(path) else Path(path)


def filesystem(path: Location) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of ``path`` and the path inside it; a bad URI names itself."""
    if not is_uri(path):
        return pafs.LocalFileSystem(), str(Path(path).absolute())
    try:
        return pafs.FileSystem.from_uri(str(path))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
        raise ValueError(f"storage location {str(path)!r}: {err}") from None


def exists(path: Location) -> bool:
    if not is_uri(path):
        return Path(path).exists()
    fs, inner = filesystem(path)
    return fs.get_file_info(inner).type != pafs.FileType.NotFound


def size(path: Location) -> int:
    """Bytes of a file."""
    if not is_uri(path):
        return Path(path).stat().st_size
    fs, inner = filesystem(path)
    return int(fs.get_file_info(inner).size)


def list_dir(path: Location) -> list[str]:
    """Names of the entries of a folder ([] when it does not exist)."""
    if not is_uri(path):
        return sorted(p.name for p in Path(path).iterdir()) if Path(path).is_dir() else []
    fs, inner = filesystem(path)
    if fs.get_file_info(inner).type != pafs.FileType.Directory:
        return []
    return sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(inner)))


def local_path(path: Location) -> Path | None:
    """The local path of ``path`` (a plain path or a ``file://`` URI), else None."""
    if not is_uri(path):
        return Path(path)
    text = str(path)
    return Path(text.removeprefix("file://")) if text.startswith("file://") else None


def staging_dir(final: Location) -> Path | ObjectPath:
    """A folder of this writer's own, ``.<name>.<random>.tmp`` beside ``final``, to write what
    :func:`pipeline.runtime.store.folders.publish` then puts at ``final``.

    Every call gets a new folder and none touches another: a sibling may be a live writer's
    (removing the leftovers of dead writers is :func:`remove_staging`'s job, under the cell's
    claim). On an object store the folder is a prefix, created by the first write into it.
    """
    local = local_path(final)
    if local is None:
        final = location(final)
        return final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
    local.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=local.parent, prefix=f".{local.name}.", suffix=".tmp"))


def staging_of(final: Location) -> list[Path | ObjectPath]:
    """The staging folders beside ``final`` (``.tmp``), and folders a publisher set aside
    (``.old``), of every writer, live or dead."""
    base, name = location(final).parent, location(final).name
    return [base / n for n in list_dir(base)
            if n.startswith(f".{name}.") and n.endswith((".tmp", ".old"))]


def remove_staging(final: Location) -> int:
    """Delete every staging folder of ``final`` (see :func:`staging_of`); how many there were.

    Only for the holder of ``final``'s claim, at a moment when no live writer stages it: when it
    has just taken the claim (released by, or taken from, a dead holder), or when its own
    writer has returned (what is left is a lost attempt's).
    """
    left = staging_of(final)
    for folder in left:
        remove_tree(folder)
    return len(left)


@contextlib.contextmanager
def publish_lock(final: Path) -> Iterator[None]:
    """An exclusive ``flock`` of ``.<name>.lock`` beside ``final`` while the block runs, for the
    check-then-rename of a publish. The file exists only while held: it is created by the
    first taker, and deleted by each holder before it lets go (a waiter that then gets the lock
    of the deleted file sees that the path no longer names it, and takes the lock anew), so a
    store at rest has no lock files. A holder killed in the block leaves the file behind,
    unlocked; the next publisher of ``final`` takes it and deletes it."""
    lock = final.parent / f".{final.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now, held = os.stat(lock), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(lock)
        os.close(fd)


def rename_new(work: Path, final: Path) -> bool:
    """Rename the folder ``work`` to ``final`` if nothing is at ``final``; False if something is.

    rename(2) of a folder onto a non-empty folder fails (EEXIST/ENOTEMPTY), so even without a
    lock this never replaces a published cell; the caller holds :func:`publish_lock`, which
    also keeps two writers from racing on an empty ``final``.
    """
    if os.path.lexists(final):
        return False
    try:
        os.rename(work, final)
    except OSError as err:
        if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
            return False
        raise
    return True


def set_aside(final: Path) -> Path:
    """Move ``final`` out of the way (to ``.<name>.<random>.old`` beside it); its new path."""
    trash = final.parent / f".{final.name}.{uuid.uuid4().hex}.old"
    os.rename(final, trash)
    return trash


def move_file(src: Location, dst: Location) -> None:
    """Move one file (a rename locally; pyarrow's ``move`` on an object store: copy, delete)."""
    if not is_uri(src) and not is_uri(dst):
        os.replace(src, dst)
        return
    fs, inner = filesystem(src)
    target = filesystem(dst)[1]
    fs.create_dir(target.rstrip("/").rsplit("/", 1)[0], recursive=True)
    fs.move(inner, target)


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """An exclusive ``flock`` of the file ``lock`` (created), held while the block runs; the OS
    releases it if the process dies."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def remove_file(path: Location) -> None:
    """Delete a file if it exists."""
    if not is_uri(path):
        Path(path).unlink(missing_ok=True)
        return
    fs, inner = filesystem(path)
    if fs.get_file_info(inner).type != pafs.FileType.NotFound:
        fs.delete_file(inner)


def remove_tree(path: Location) -> None:
    """Delete a folder (a prefix on object stores) and everything under it, if it exists."""
    if not is_uri(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    fs, inner = filesystem(path)
    if fs.get_file_info(inner).type != pafs.FileType.NotFound:
        fs.delete_dir(inner)


def atomic_write_bytes(path: Location, data: bytes) -> None:
    if is_uri(path):
        fs, inner = filesystem(path)
        parent, name = inner.rstrip("/").rsplit("/", 1)
        fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        try:
            with fs.open_output_stream(tmp) as f:
                f.write(data)
            fs.move(tmp, inner)
        except BaseException:
            if fs.get_file_info(tmp).type != pafs.FileType.NotFound:
                fs.delete_file(tmp)
            raise
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def read_bytes(path: Location) -> bytes:
    if not is_uri(path):
        return Path(path).read_bytes()
    fs, inner = filesystem(path)
    with fs.open_input_stream(inner) as f:
        return bytes(f.read())


def file_sha256(path: Location) -> str:
    h = hashlib.sha256()
    fs, inner = filesystem(path)
    with fs.open_input_stream(inner) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_json(path: Location, obj: Any) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"
    atomic_write_bytes(path, text.encode())


def read_json(path: Location) -> Any:
    return json.loads(read_bytes(path))


def read_frame(path: Location) -> pd.DataFrame:
    fs, inner = filesystem(path)
    return pq.read_table(inner, filesystem=fs).to_pandas()


def read_frames(paths: Mapping[str, Location], key: str) -> pd.DataFrame:
    """The Parquet files ``paths`` (name → file), read by a pool of threads and concatenated
    into one frame with a last column ``key`` holding each row's name (replacing a column of that
    name; columns a file lacks are missing values); an empty frame when there are none. One
    pandas conversion for all: at a thousand small files, converting each costs more than
    reading it."""
    if not paths:
        return pd.DataFrame()

    def read(item: tuple[str, Location]) -> pa.Table:
        name, path = item
        fs, inner = filesystem(path)
        table = pq.read_table(inner, filesystem=fs)
        if key in table.column_names:  # replaced, as pandas' assign does
            table = table.drop_columns([key])
        return table.append_column(key, pa.array([name] * table.num_rows, pa.string()))

    with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
        tables = list(pool.map(read, paths.items()))
    return pa.concat_tables(tables, promote_options="default").to_pandas()


def write_table(table: pa.Table, path: Location) -> None:
    """Parquet with dictionary encoding off for floats: float columns rarely repeat, so a
    dictionary only costs time and space."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=[f.name for f in table.schema
                                                if not pa.types.is_floating(f.type)
                                                and not pa.types.is_fixed_size_list(f.type)])
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def write_frame(df: pd.DataFrame, path: Location) -> None:
    write_table(pa.Table.from_pandas(df, preserve_index=False), path)


def embeddings_table(views: Mapping[int, np.ndarray], labels: np.ndarray | None,
                     metadata: Mapping[str, str]) -> pa.Table:
    """DESIGN.md contract: sample_id int64, label int32 (nullable), view int8,
    z fixed_size_list<float32>[d]."""
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


def read_embeddings(path: Location, view: int) -> np.ndarray:
    """The ``(N, d)`` float32 matrix of one view, in sample_id order."""
    fs, inner = filesystem(path)
    table = pq.read_table(inner, filesystem=fs, columns=["sample_id", "view", "z"],
                          filters=[("view", "=", view)])
    table = table.sort_by("sample_id")
    z = table.column("z").combine_chunks()
    d = z.type.list_size
    return z.flatten().to_numpy(zero_copy_only=False).reshape(-1, d)


def read_metadata(path: Location) -> dict[str, str]:
    fs, inner = filesystem(path)
    meta = pq.read_schema(inner, filesystem=fs).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def embed_dim(path: Location) -> int:
    """d of the embeddings file (from its schema)."""
    fs, inner = filesystem(path)
    return int(pq.read_schema(inner, filesystem=fs).field("z").type.list_size)


def _split_table(split: str, x: np.ndarray, y: np.ndarray | None) -> pa.Table:
    n = x.shape[0]
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(n, -1)
    return pa.table({
        "split": pa.array([split] * n),
        "label": pa.array(y, type=pa.int32()) if y is not None else pa.nulls(n, type=pa.int32()),
        "x": pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), type=pa.float32()),
                                               flat.shape[1]),
    })


def write_dataset(ds: Dataset, path: Location) -> None:
    """Both splits in one file: split, label int32 (nullable), x fixed_size_list<float32>.

    Images are stored flattened; the metadata keeps ``input_shape`` to restore them.
    """
    table = pa.concat_tables([_split_table("train", ds.x_train, ds.y_train),
                              _split_table("heldout", ds.x_heldout, ds.y_heldout)])
    meta = {"name": ds.name, "dataset_hash": ds.content_hash(),
            "input_shape": json.dumps(list(ds.input_shape)),
            "n_classes": json.dumps(ds.n_classes)}
    write_table(table.replace_schema_metadata(meta), path)


def read_training_labels(path: Location) -> np.ndarray | None:
    """The training split's labels of a dataset file (int64), reading the split and label
    columns only; None when it has none."""
    fs, inner = filesystem(path)
    table = pq.read_table(inner, filesystem=fs, columns=["split", "label"])
    labels = table.filter(pa.compute.equal(table.column("split"), "train")).column("label")
    return None if labels.null_count == len(labels) else labels.to_numpy().astype(np.int64)


def read_dataset(path: Location) -> Dataset:
    fs, inner = filesystem(path)
    table = pq.read_table(inner, filesystem=fs)
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
