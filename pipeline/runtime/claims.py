"""Claims on cells, so that drivers sharing a store never train the same cell at the same time.

Two train stages on one store (``dvc queue start -j 2``, two users, two clusters) each claim the
cells they are about to train. A claim names its driver; a driver proves it is alive with a
heartbeat file it rewrites every few seconds. A claim whose driver is dead — its process is gone
(same host) or its heartbeat is older than ``ttl`` — is taken over by the next driver that asks.
The holder releases a claim once the cell is written *and* logged to MLflow, so the other driver
finds the run and never creates a second one.

On a local or ``file://`` store, every check-and-take happens under an exclusive ``flock`` of
``claims/.lock``; object stores have no such primitive, and there the take is a check then a
write (two drivers starting within the same second can both win; use one driver per cell
prefix there).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.runtime import storage
from pipeline.runtime.storage import Location


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` of the file ``path`` (created with its folder) while inside: the
    one lock between processes of this machine or of a shared local file system."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Holder:
    driver: str
    host: str
    pid: int
    since: float


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    """One driver's claims on a store; use as a context manager (it runs the heartbeat)."""

    def __init__(self, store: Location, ttl: float = 30.0, beat: float = 3.0):
        self.folder = storage.location(store) / "claims"
        self.ttl, self.beat = ttl, beat
        self.me = Holder(uuid.uuid4().hex[:12], socket.gethostname(), os.getpid(), time.time())
        self.held: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._local = not storage.is_uri(store) or str(store).startswith("file://")

    # --- heartbeat -------------------------------------------------------------------------
    def _heartbeat_path(self, driver: str) -> Location:
        return self.folder / "drivers" / f"{driver}.json"

    def _beat(self) -> None:
        storage.atomic_write_json(self._heartbeat_path(self.me.driver),
                                  {**asdict(self.me), "beat": time.time()})

    def _run(self) -> None:
        while not self._stop.wait(self.beat):
            with contextlib.suppress(OSError):
                self._beat()

    def __enter__(self) -> Claims:
        self._beat()
        self._thread = threading.Thread(target=self._run, name="cbench-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for key in list(self.held):
            self.release(key)
        with contextlib.suppress(OSError):
            storage.remove_file(self._heartbeat_path(self.me.driver))

    # --- claims ----------------------------------------------------------------------------
    def _path(self, key: str) -> Location:
        return self.folder / (key.replace("/", "-") + ".json")

    @contextlib.contextmanager
    def _mutex(self) -> Iterator[None]:
        if not self._local:
            yield
            return
        with exclusive_lock(Path(str(self.folder).removeprefix("file://")) / ".lock"):
            yield

    def _read(self, key: str) -> Holder | None:
        try:
            return Holder(**storage.read_json(self._path(key)))
        except (FileNotFoundError, OSError, ValueError, TypeError, json.JSONDecodeError):
            return None

    def alive(self, holder: Holder) -> bool:
        """The holder's driver is running: its process exists (same host) and it beats."""
        if holder.driver == self.me.driver:
            return True
        if holder.host == self.me.host and not _pid_alive(holder.pid):
            return False
        try:
            beat = float(storage.read_json(self._heartbeat_path(holder.driver))["beat"])
        except (FileNotFoundError, OSError, ValueError, KeyError, json.JSONDecodeError):
            return time.time() - holder.since < self.ttl  # claimed just now, first beat pending
        return time.time() - beat < self.ttl

    def holder(self, key: str) -> Holder | None:
        """The live holder of ``key`` other than this driver, or None."""
        current = self._read(key)
        if current is None or current.driver == self.me.driver or not self.alive(current):
            return None
        return current

    def try_claim(self, key: str) -> bool:
        """Claim ``key`` unless a live driver holds it; a dead driver's claim is taken over."""
        with self._mutex():
            current = self._read(key)
            if current is not None and current.driver != self.me.driver and self.alive(current):
                return False
            storage.atomic_write_json(self._path(key), asdict(self.me))
        self.held.add(key)
        return True

    def release(self, key: str) -> None:
        with self._mutex():
            current = self._read(key)
            if current is not None and current.driver == self.me.driver:
                storage.remove_file(self._path(key))
        self.held.discard(key)
