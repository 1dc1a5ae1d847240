"""Train a grid against the cell store: what is done, stale, failed or to train; claims; MLflow.

:func:`plan` looks at the store for every cell of the grid (its current version: the code
fingerprint and the dataset hash) and decides:

- ``done``: the current version is intact in the store — reused, whoever trained it;
- ``failed``: the current version failed by itself before — not retried until the cell's
  config or version changes (a lost worker is not such a failure: it leaves no record);
- ``stale``: only another version is done (other code or data) — with
  ``train.on_code_change: keep`` that version is used and marked stale; with ``retrain`` the
  cell is trained anew beside it; with ``fail`` the stage stops before any work;
- ``train``: nothing usable — trained.

:func:`train` claims the cells to train (:mod:`pipeline.runtime.store.claims`), runs them, logs each
to MLflow before releasing its claim, and waits for cells another live driver is training. The
staging folders of a cell are removed only by the holder of its claim: when it takes the claim
(the previous holder released it or died) and when its own writer has returned.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.fingerprint import code_fingerprint
from pipeline.grid import Cell
from pipeline.runtime.cells.one_cell import CellOutcome
from pipeline.runtime.store.claims import Claims
from pipeline.runtime.store.files import Dir, Location, remove_staging
from pipeline.runtime.store.folders import (
    CellState,
    cell_folder,
    inspect,
    read_record,
    version_of,
    versions,
)

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Entry:
    """One cell of the grid and what the store holds for it."""

    cell: Cell
    version: str  # the current version (code fingerprint + dataset hash)
    folder: Dir  # the folder whose files the later stages read
    action: str  # done | failed | stale | train
    record: Mapping[str, Any] = field(default_factory=dict)
    used_version: str = ""  # the version in ``folder`` (another one when kept stale)
    changed: tuple[str, ...] = ()  # modules whose code differs from the stale version's
    problem: str = ""  # why a present version is not reusable (damaged files, ...)

    @property
    def key(self) -> str:
        """The training this cell's files come from: cells that differ only in keys their
        training does not read share it (:attr:`pipeline.grid.Cell.training_id`)."""
        return f"{self.cell.training_id}/{self.version}"


def _changed(cell: Cell, record: Mapping[str, Any]) -> tuple[str, ...]:
    recorded = record.get("code_fingerprint") or {}
    changed = code_fingerprint(cell).changed(recorded) if isinstance(recorded, Mapping) else []
    return tuple(changed) or ("dataset",)


def plan(cells: Sequence[Cell], root: Location, dataset_hash: str, snapshot_epochs: Sequence[int],
         on_code_change: str) -> list[Entry]:
    """The action for every cell (see the module docstring)."""
    entries = []
    for cell in cells:
        t = cell.train  # the device, and the setting `auto` was measured to (never `auto` here)
        version = version_of(code_fingerprint(cell).digest, dataset_hash,
                             f"{t.device}/{t.precision}/{t.memory_format}")
        folder = cell_folder(root, cell.training_id, version)
        state = inspect(folder, snapshot_epochs)
        entry = Entry(cell, version, folder, "train", state.record, version, problem=state.problem)
        if state.status in ("done", "failed"):
            entry = replace(entry, action=state.status)
        else:
            other = next((v for v in versions(root, cell.training_id) if v != version and inspect(
                cell_folder(root, cell.training_id, v), snapshot_epochs).status == "done"), None)
            if other is not None:
                old = read_record(cell_folder(root, cell.training_id, other)) or {}
                entry = replace(entry, changed=_changed(cell, old), action="stale")
                if on_code_change == "keep":
                    entry = replace(entry, folder=cell_folder(root, cell.training_id, other),
                                    record=old, used_version=other)
        entries.append(entry)
    return entries


def first_per_training(entries: Iterable[Entry]) -> list[Entry]:
    """The first entry of each training (:attr:`Entry.key`), in order: cells that differ only in
    keys their training does not read are trained once."""
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen.setdefault(entry.key, entry)
    return list(seen.values())


def stale_summary(entries: Sequence[Entry]) -> str:
    """'N cells trained by other code (modules ...)', for messages."""
    stale = [e for e in entries if e.action == "stale"]
    modules = sorted({m for e in stale for m in e.changed})
    return f"{len(stale)} cells were trained by other code or data (changed: {', '.join(modules)})"


Runner = Callable[[Sequence[Entry], Callable[[Entry, CellOutcome], None]], list[CellOutcome]]


# The driver hands finished cells to ``on_done`` (MLflow) in batches of this many, or fewer when
# the oldest has waited this long or the run is over: one transaction per batch, not per cell.
LOG_BATCH = 64
LOG_SECONDS = 2.0

Finished = Sequence[tuple[Entry, CellOutcome]]


def train(todo: Sequence[Entry], claims: Claims, run: Runner,
          on_done: Callable[[Finished], None],
          reinspect: Callable[[Entry], CellState],
          log_batch: int = LOG_BATCH, log_seconds: float = LOG_SECONDS
          ) -> tuple[dict[str, CellOutcome], dict[str, CellOutcome]]:
    """Train ``todo`` under claims: cells another live driver holds are waited for, then reused
    if it finished them (or trained here if it died). ``on_done`` runs in the driver with this
    driver's finished cells, at most ``log_batch`` at a time and none held back longer than
    ``log_seconds`` after the next finishes (nor past the end of the run), before their claims
    are released.

    Returns (the cells this driver trained, the cells another driver trained meanwhile).
    """
    outcomes: dict[str, CellOutcome] = {}
    reused: dict[str, CellOutcome] = {}
    pending = list(todo)
    announced: set[str] = set()

    def reuse(entry: Entry, state: CellState) -> None:
        reused[entry.cell.cell_id] = CellOutcome(
            entry.cell.cell_id, "ok" if state.status == "done" else "failed",
            str(state.record.get("reason", "")), record=dict(state.record))

    while pending:
        mine, others = [], []
        for entry in pending:
            fresh = entry.key not in claims.held
            if not claims.try_claim(entry.key):
                others.append(entry)
                continue
            if fresh:  # released, or taken from a dead driver: what its writers left is ours
                remove_staging(entry.folder)
            # the plan is older than the claim: another driver may have finished the cell and
            # released it in between, so look again under the claim before training it
            state = reinspect(entry)
            if state.status == "todo":
                mine.append(entry)
            else:
                claims.release(entry.key)
                reuse(entry, state)

        batches = _LogBatches(claims, on_done, log_batch, log_seconds)
        try:
            for outcome in run(mine, batches.add):
                outcomes[outcome.cell_id] = outcome
        finally:
            batches.settle()
        pending = []
        for entry in others:
            holder = claims.holder(entry.key)
            if holder is not None:
                if holder.driver not in announced:
                    announced.add(holder.driver)
                    print(f"train: waiting for cells that driver {holder.driver} (pid "
                          f"{holder.pid} on {holder.host}) is training", file=sys.stderr)
                pending.append(entry)
                continue
            state = reinspect(entry)
            if state.status == "todo":
                pending.append(entry)  # its driver died before finishing: claim it next round
            else:
                reuse(entry, state)
        if pending and not mine:
            time.sleep(POLL_SECONDS)
    return outcomes, reused


class _LogBatches:
    """Finished cells held for ``on_done`` (see :func:`train`); :meth:`settle` hands them over,
    removes what their writers left and releases their claims."""

    def __init__(self, claims: Claims, on_done: Callable[[Finished], None], size: int,
                 seconds: float):
        self.claims, self.on_done, self.size, self.seconds = claims, on_done, size, seconds
        self.waiting: list[tuple[Entry, CellOutcome]] = []
        self.oldest = 0.0

    def add(self, entry: Entry, outcome: CellOutcome) -> None:
        if not self.waiting:
            self.oldest = time.monotonic()
        self.waiting.append((entry, outcome))
        if len(self.waiting) >= self.size or time.monotonic() - self.oldest >= self.seconds:
            self.settle()

    def settle(self) -> None:
        batch, self.waiting = self.waiting, []
        try:
            if batch:
                self.on_done(batch)  # also when a publish found the cell done (reused): most
                # often our own earlier try of it (a retried task), which nobody else logs
            for entry, _ in batch:  # our writer is back: what is left, a lost try left
                remove_staging(entry.folder)
        finally:
            self.claims.release_many([entry.key for entry, _ in batch])


def manifest_row(entry: Entry, status: str, reason: str, record: Mapping[str, Any],
                 failure_class: str = "") -> dict[str, Any]:
    """One row of ``data/grid.json``; ``failure_class`` (cell | environment) of a failed cell."""
    fingerprint = record.get("code_fingerprint") or {}
    kind = failure_class or str(record.get("failure_class", "")) if status != "ok" else ""
    return {"cell_id": entry.cell.cell_id, "training_id": entry.cell.training_id,
            "status": status, "reason": reason, "failure_class": kind,
            "version": entry.used_version, "path": str(entry.folder),
            "stale": entry.action == "stale" and entry.used_version != entry.version,
            "stale_because": ", ".join(entry.changed) if entry.action == "stale" else "",
            "code_fingerprint": fingerprint.get("digest", "") if isinstance(fingerprint, Mapping)
            else "", "embeddings_sha256": str(record.get("embeddings_sha256", "")),
            **entry.cell.grid_values()}

