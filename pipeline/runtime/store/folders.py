"""The cell store: one place every workspace of the project reads and writes finished cells.

A cell is addressed by its config (``cell_id``) and its *version*: the fingerprint of the code
that trains it together with the dataset's content hash. Its files live in
``<store>/cells/<cell_id>/<version>/``; another version of the same cell (older code, other
data) sits beside it, so branches, DVC experiments (``--temp``, ``--queue``) and clones that
share a store never overwrite each other's cells, and each finds the cells it can reuse.

The store is ``compute.storage`` when set (any ``pyarrow.fs`` URI), else ``$CBENCH_STORE``, else
a per-user cache (``$XDG_CACHE_HOME/contrastive-bench``, by default
``~/.cache/contrastive-bench``), shared by every clone on the machine. The project root — where
``mlruns.db`` lives — is the DVC root, also from inside an experiment's temporary copy.

A cell is *done* when its ``cell.json`` says ok and every file it lists has the size and SHA-256
it recorded (a truncated or corrupted file makes it incomplete: it is retrained). A cell that
failed by itself (a NaN loss, an exception in its own code) records the failure and is not
retried until its config or version changes; one that the environment failed (no such device,
out of memory, disk, I/O: :mod:`pipeline.runtime.cells.failures`) is retried on the next run.

Publishing is first-writer-wins (:func:`publish`): a writer stages the whole cell in a folder of
its own and renames it onto the cell's path only where no done cell is; a later writer that
finds a done cell there discards its copy and reports the cell reused, and a failure record
never replaces a good cell. Drivers' claims (:mod:`pipeline.runtime.store.claims`) keep two drivers
from training one cell; publishing keeps a cell whole and first even when a claim was lost.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import store_path
from pipeline.runtime.store import files, layout
from pipeline.runtime.store.files import Dir, Location
from pipeline.runtime.store.layout import ENVIRONMENT

EXPERIMENT_COPY = "/.dvc/tmp/exps/"  # where DVC runs --temp and --queue experiments


def project_root() -> Path:
    """The project's root: ``$DVC_ROOT`` (set by DVC for every stage, the original repository's
    root also inside an experiment's temporary copy), else the folder above an experiment copy,
    else the working directory."""
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
    cwd = str(Path.cwd().resolve())
    if EXPERIMENT_COPY in cwd + "/":
        return Path((cwd + "/").split(EXPERIMENT_COPY)[0])
    return Path(cwd)


def default_store() -> Path:
    """``$CBENCH_STORE``, else ``$XDG_CACHE_HOME/contrastive-bench`` (``~/.cache/...``): see
    :func:`pipeline.config.store_path.default_store` (where ``resolve`` checks that a cluster
    run's store is not node-local)."""
    return store_path.default_store(os.environ)


def store_root(storage_uri: str | None) -> Dir:
    """``compute.storage`` when set, else :func:`default_store`. On a cluster that is the shared
    volume (``$CBENCH_STORE`` on every pod and node) or an object store URI."""
    return files.location(storage_uri) if storage_uri else default_store()


def version_of(code_digest: str, dataset_hash: str, runs: str = "") -> str:
    """12 hex digits naming the code and data that train a cell, and what it runs in (``runs``:
    device/precision/memory format, as measured when the params said ``auto``)."""
    blob = f"{code_digest}/{dataset_hash}" + (f"/{runs}" if runs else "")
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def cell_folder(root: Location, cell_id: str, version: str) -> Dir:
    return files.location(root) / cell_id / version


def versions(root: Location, cell_id: str) -> list[str]:
    """The versions of ``cell_id`` in the store that have a ``cell.json``, newest first."""
    base = files.location(root) / cell_id
    found = []
    for name in files.list_dir(base):
        record = read_record(base / name)
        if record is not None:
            found.append((str(record.get("finished_at", "")), name))
    return [name for _, name in sorted(found, reverse=True)]


def read_record(folder: Location) -> dict[str, Any] | None:
    """The cell's ``cell.json``, or None when it is missing or unreadable."""
    path = files.location(folder) / layout.RECORD
    try:
        record = files.read_json(path)
    except (FileNotFoundError, OSError, ValueError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def checksums(folder: Location, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{file: {"bytes": size, "sha256": digest}}`` of the named files of a cell folder."""
    return {name: {"bytes": files.size(files.location(folder) / name),
                   "sha256": files.file_sha256(files.location(folder) / name)}
            for name in names}


def verify(folder: Location, recorded: Mapping[str, Mapping[str, Any]]) -> str:
    """'' when every recorded file has its recorded size and SHA-256, else what is wrong."""
    for name, expected in sorted(recorded.items()):
        path = files.location(folder) / name
        if not files.exists(path):
            return f"{name} is missing"
        if files.size(path) != expected["bytes"]:
            return f"{name} has {files.size(path)} bytes, {expected['bytes']} recorded"
        if files.file_sha256(path) != expected["sha256"]:
            return f"{name} does not match its recorded SHA-256"
    return ""


@dataclass(frozen=True)
class CellState:
    """What the store holds for one version of a cell.

    status: ``done`` (ok and intact), ``failed`` (the cell's own failure, recorded), or
    ``todo`` (nothing, a half-written attempt, or files that no longer match: ``problem``).
    """

    status: str
    record: Mapping[str, Any] = field(default_factory=dict)
    problem: str = ""


def inspect(folder: Location, snapshot_epochs: Sequence[int] = ()) -> CellState:
    """The state of a cell folder: its record, and whether its files are intact."""
    record = read_record(folder)
    if record is None:
        return CellState("todo", problem="no cell.json" if files.exists(folder) else "")
    if record.get("status") == "failed":
        if record.get("failure_class") == ENVIRONMENT:  # where it ran failed it: try again
            reason = str(record.get("reason", "")).splitlines()[:1]
            return CellState("todo", record, f"retried: an environment failure ({''.join(reason)})")
        return CellState("failed", record)
    if record.get("status") != "ok":
        return CellState("todo", record, f"cell.json status {record.get('status')!r}")
    sums = record.get("files")
    if not isinstance(sums, Mapping):
        return CellState("todo", record, "cell.json lists no checksums")
    missing = [e for e in snapshot_epochs if layout.snapshot(e) not in sums]
    if missing:
        return CellState("todo", record, f"no snapshot for epochs {missing}")
    problem = verify(folder, sums)
    return CellState("todo" if problem else "done", record, problem)


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did. kept: a done cell was at the path and stays (the staged copy
    was discarded); record: the ``cell.json`` now at the path (the kept one, or the new one)."""

    kept: bool
    record: Mapping[str, Any]


def supersedes(new: Mapping[str, Any], there: CellState) -> bool:
    """Whether the staged record ``new`` may replace what the store holds at its path.

    Nothing, a half-written or damaged cell, or a failure record: yes (a failure replaces an
    older failure). A done cell: never by a failure, never by a cell that adds nothing (the
    first good result wins); only by a good cell with files it lacks (snapshot epochs asked
    for since it was trained, which make it ``todo`` for the run that retrains it).
    """
    if there.status != "done":
        return True
    if new.get("status") != "ok":
        return False
    return bool(set(new.get("files") or {}) - set(there.record.get("files") or {}))


def publish(work: Location, final: Location) -> Published:
    """Put the staged cell folder ``work`` (its ``cell.json`` written last) at ``final``,
    unless what is there stays (:func:`supersedes`); then ``work`` is deleted.

    Local and ``file://`` stores: under ``final``'s publish lock (``files.publish_lock``),
    what is at ``final`` is inspected, set aside if superseded, and ``work`` is renamed onto
    the then empty path (``files.rename_new``: a folder rename that cannot replace a
    published one). A writer killed at any point leaves at ``final`` what was there, nothing
    (killed between setting aside and renaming), or the new cell, never a mix; its staging and
    set-aside folders stay until the next holder of the cell's claim removes them
    (``files.remove_staging``).

    A good record must list every file of ``layout.REQUIRED`` (a writer whose staging was
    removed under it, its claim taken, cannot publish what it rewrote of it).

    Object stores: the same decision, then the files are moved one by one, ``cell.json``
    last. There is no lock: two publishers in the same instant can interleave their files,
    which the recorded checksums then reject (the cell is retrained), and a good cell published
    between the check and the moves can be overwritten by an equal one; the cell's claim is
    what keeps two writers apart there.
    """
    new = read_record(work)
    if new is None:
        there = inspect(final)
        if there.status == "done":  # this writer's claim was taken and its staging removed
            return Published(True, there.record)
        raise ValueError(f"{work}: no cell.json to publish; write the cell's record last, "
                         "then publish")
    lacking = sorted(set(layout.REQUIRED) - {layout.RECORD} - set(new.get("files") or {}))
    if new.get("status") == "ok" and lacking:  # e.g. a writer whose staging was removed midway
        raise ValueError(f"{work}: cell.json says ok but lists no {', '.join(lacking)}; a good "
                         "cell has every file of layout.REQUIRED")
    local, staged = files.local_path(final), files.local_path(work)
    if local is None or staged is None:
        return _publish_objects(files.location(work), files.location(final), new)
    with files.publish_lock(local):
        while True:  # a second turn only if a writer that skips the lock got in between
            there = inspect(local)
            if not supersedes(new, there):
                files.remove_tree(staged)
                return Published(True, there.record)
            aside = files.set_aside(local) if os.path.lexists(local) else None
            moved = files.rename_new(staged, local)
            if aside is not None:
                files.remove_tree(aside)
            if moved:
                break
    return Published(False, new)


def _publish_objects(work: Dir, final: Dir, new: Mapping[str, Any]) -> Published:
    """:func:`publish` on an object store: decide, then move file by file, ``cell.json`` last."""
    there = inspect(final)
    if not supersedes(new, there):
        files.remove_tree(work)
        return Published(True, there.record)
    for name in files.list_dir(work):
        if name != layout.RECORD:
            files.move_file(work / name, final / name)
    files.move_file(work / layout.RECORD, final / layout.RECORD)
    files.remove_tree(work)
    return Published(False, new)


def verify_record_path(store: Location, training_id: str, version: str) -> Location:
    """Where ``cbench verify``'s check of a cell is kept: beside the cells, per training and
    version (:mod:`pipeline.runtime.cells.verify`)."""
    return files.location(store) / "verify" / training_id / f"{version}.json"


def read_verify_checks(store: Location,
                       rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """cell id → its latest check, for the manifest ``rows`` (``data/grid.json`` cells)."""
    out = {}
    for row in rows:
        path = verify_record_path(store, str(row.get("training_id") or row["cell_id"]),
                                  str(row.get("version", "")))
        if files.exists(path):
            out[str(row["cell_id"])] = files.read_json(path)
    return out
