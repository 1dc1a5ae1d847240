"""Claims on cells, so that drivers sharing a store never train the same cell at the same time.

Two train stages on one store (``dvc queue start -j 2``, two users, two clusters) each claim the
cells they are about to train. A claim is a *lease*: it names its driver, and the driver keeps
it alive with a heartbeat file that it rewrites every ``beat`` seconds with a counter that goes
up. A reader never compares the heartbeat's wall time with its own clock (two hosts' clocks may
be hours apart): it remembers, per driver, the heartbeat content it last saw and the time on its
*own* monotonic clock when it first saw that content; the driver is dead once that content has
not changed for ``ttl`` seconds of the reader's clock. A claim the reader has never looked at
gets a full ``ttl`` from its first look, so a driver that starts after another died waits one
``ttl`` before taking that driver's cells.

The holder's process is looked up only where a PID means the same process to both sides: the
same kernel (boot id) and the same PID namespace (the inode of ``/proc/self/ns/pid``), both
recorded in the claim. A holder whose PID is gone there is dead at once; anywhere else
(another host, a container sharing the hostname but not the PID namespace, a system without
``/proc``) the heartbeat alone decides.

The holder releases a claim once the cell is written *and* logged to MLflow, so the other
driver finds the run and never creates a second one. Whoever takes a claim that was released
or whose holder died owns what that holder left (its staging folders: see
:func:`pipeline.runtime.grid_run.train`).

On a local or ``file://`` store, every check-and-take happens under an exclusive ``flock`` of
``claims/.lock``; object stores have no such primitive, and there the take is a check then a
write (two drivers starting within the same second can both win; use one driver per cell
prefix there). Publishing is first-writer-wins in any case
(:func:`pipeline.runtime.store.folders.publish`), so a claim taken wrongly costs a duplicate
training, never a replaced cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.runtime.store import files
from pipeline.runtime.store.files import Location


@dataclass(frozen=True)
class Holder:
    """A claim's driver: who and where. ``since`` (wall time) is for people reading the claim;
    no liveness decision reads it. ``boot`` and ``pidns`` ('' and 0 where unknown) say in which
    kernel and PID namespace ``pid`` means something."""

    driver: str
    host: str
    pid: int
    since: float
    boot: str = ""
    pidns: int = 0


def pid_space() -> tuple[str, int]:
    """This process's kernel boot id and PID-namespace inode; ('', 0) where there is no /proc."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return boot, os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return "", 0


def same_pid_space(a: Holder, b: Holder) -> bool:
    """Whether a PID of ``a`` names the same process for ``b``: one kernel, one PID namespace."""
    return bool(a.boot) and a.pidns != 0 and (a.boot, a.pidns) == (b.boot, b.pidns)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    """One driver's claims on a store; use as a context manager (it runs the heartbeat).

    ttl: seconds of this reader's clock without a change of a holder's heartbeat after which
    the holder is dead; beat: seconds between this driver's own heartbeats (well under ttl);
    clock: the reader's monotonic clock (``time.monotonic``; tests pass their own).
    """

    def __init__(self, store: Location, ttl: float = 30.0, beat: float = 3.0,
                 clock: Callable[[], float] = time.monotonic):
        self.folder = files.location(store) / "claims"
        self.ttl, self.beat, self.clock = ttl, beat, clock
        boot, pidns = pid_space()
        self.me = Holder(uuid.uuid4().hex[:12], socket.gethostname(), os.getpid(), time.time(),
                         boot, pidns)
        self.held: set[str] = set()
        self._beats = 0
        self._seen: dict[str, tuple[bytes | None, float]] = {}  # driver -> (heartbeat, first seen)
        self._seen_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- heartbeat -------------------------------------------------------------------------
    def _heartbeat_path(self, driver: str) -> Location:
        return self.folder / "drivers" / f"{driver}.json"

    def _beat(self) -> None:
        self._beats += 1  # the count makes every heartbeat differ; 'beat' (wall) is for people
        files.atomic_write_json(self._heartbeat_path(self.me.driver),
                                  {**asdict(self.me), "count": self._beats, "beat": time.time()})

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
            files.remove_file(self._heartbeat_path(self.me.driver))

    # --- liveness --------------------------------------------------------------------------
    def _heartbeat(self, driver: str) -> bytes | None:
        try:
            return files.read_bytes(self._heartbeat_path(driver))
        except (FileNotFoundError, OSError):
            return None

    def beating(self, driver: str) -> bool:
        """Whether ``driver``'s heartbeat changed within the last ``ttl`` of this reader's
        clock (counted from this reader's first look at it)."""
        content, now = self._heartbeat(driver), self.clock()
        with self._seen_lock:
            seen = self._seen.get(driver)
            if seen is None or seen[0] != content:
                self._seen[driver] = (content, now)
                return True
            return now - seen[1] < self.ttl

    def alive(self, holder: Holder) -> bool:
        """The holder's driver is running: its process exists (where its PID can be checked:
        same kernel and PID namespace) and its heartbeat advances."""
        if holder.driver == self.me.driver:
            return True
        if same_pid_space(holder, self.me) and not _pid_alive(holder.pid):
            return False
        return self.beating(holder.driver)

    # --- claims ----------------------------------------------------------------------------
    def _path(self, key: str) -> Location:
        return self.folder / (key.replace("/", "-") + ".json")

    def _mutex(self) -> contextlib.AbstractContextManager[None]:
        local = files.local_path(self.folder)
        return files.exclusive(local / ".lock") if local is not None else contextlib.nullcontext()

    def _read(self, key: str) -> Holder | None:
        try:
            return Holder(**files.read_json(self._path(key)))
        except (FileNotFoundError, OSError, ValueError, TypeError, json.JSONDecodeError):
            return None

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
            files.atomic_write_json(self._path(key), asdict(self.me))
        self.held.add(key)
        return True

    def release(self, key: str) -> None:
        self.release_many([key])

    def release_many(self, keys: Sequence[str]) -> None:
        """Release ``keys`` (those this driver holds), under one take of the lock."""
        if not keys:
            return
        with self._mutex():
            for key in keys:
                current = self._read(key)
                if current is not None and current.driver == self.me.driver:
                    files.remove_file(self._path(key))
        self.held.difference_update(keys)
