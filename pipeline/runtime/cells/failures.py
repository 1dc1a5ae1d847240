"""Why a cell failed — its own computation, or the environment it ran in — and what to do then.

- ``cell``: the cell's own computation failed — the loss diverged, the loss or model code raised
  (a shape error in a plugin, a missing key). Running it again on the same config and code fails
  again, so the failure is recorded and not retried until the config or the code (its version)
  changes.
- ``environment``: where it ran failed it — no such device, out of memory (torch's CPU
  allocator, CUDA, ``MemoryError``), too many open files (EMFILE/ENFILE), no permission or no
  space on the store or scratch, an I/O error, a killed or lost worker or node, a timeout, a
  resource request no node can meet. It is retried at once, up to ``compute.max_retries`` times
  with back-off (:class:`RetryPolicy`); if it still fails it is recorded with its class and
  reason, and retried again on the next run (on another node, with other ``compute.*``).

:func:`classify` reads the exception and its causes (``raise ... from``, or an error raised
while handling another). An unknown exception is the cell's own: a retry loop on a
deterministic bug would hide it.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.encoders.device import DeviceUnavailableError
from pipeline.runtime.store.layout import CELL, ENVIRONMENT

CLASSES = (CELL, ENVIRONMENT)

# OSError numbers that say the machine failed the cell: disk full or quota, I/O, a lost mount,
# no memory, too many open files (this process's or the system's), no permission on a file
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM,
                                 errno.ESTALE, errno.ENODEV, errno.ENXIO, errno.ETIMEDOUT,
                                 errno.ECONNRESET, errno.ENETDOWN, errno.EHOSTUNREACH,
                                 errno.EMFILE, errno.ENFILE, errno.EACCES, errno.EPERM,
                                 errno.EAGAIN})
# words of a RuntimeError raised by an allocator, CUDA, a DataLoader or the OS, not by the
# model's own code (torch's CPU allocator: "DefaultCPUAllocator: can't allocate memory: you
# tried to allocate ... Error code 12 (Cannot allocate memory)")
_ENVIRONMENT_WORDS = ("out of memory", "can't allocate memory", "cannot allocate memory",
                      "not enough memory", "too many open files", "cuda error", "cudnn_status",
                      "cublas_status", "no cuda gpus are available", "device-side assert",
                      "nccl error", "exited unexpectedly", "killed by signal")
# exception types known by name only (importing torch.cuda's or Ray's here would tie every cell's
# code to them): torch.cuda.OutOfMemoryError, Ray's lost-worker and out-of-memory errors
_ENVIRONMENT_TYPES = frozenset({"OutOfMemoryError", "RayError", "WorkerCrashedError",
                                "NodeDiedError", "ObjectLostError", "TaskUnschedulableError",
                                "ActorUnschedulableError", "RaySystemError", "LocalRayletDiedError",
                                "OwnerDiedError"})


class CellTimeout(TimeoutError):
    """An attempt ran longer than ``compute.cell_timeout_s`` (raised by :func:`deadline`)."""


def _environment(err: BaseException) -> bool:
    if isinstance(err, DeviceUnavailableError | MemoryError | TimeoutError):
        return True
    if type(err).__name__ in _ENVIRONMENT_TYPES:
        return True
    if isinstance(err, PermissionError):
        return True
    if isinstance(err, OSError) and err.errno in _ENVIRONMENT_ERRNOS:
        return True
    return isinstance(err, RuntimeError) and any(w in str(err).lower()
                                                 for w in _ENVIRONMENT_WORDS)


def classify(err: BaseException) -> str:
    """:data:`CELL` or :data:`ENVIRONMENT` for an exception that stopped a cell: environment when
    it, or an exception it was raised from or while handling, is one the environment raises."""
    seen: set[int] = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        if _environment(link):
            return ENVIRONMENT
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return CELL


@dataclass(frozen=True)
class RetryPolicy:
    """How a cell's environment failures are retried where it runs (``compute.*``).

    max_retries: attempts after the first; backoff_s: the wait before the first retry, doubled
    before each next one (capped at :attr:`MAX_WAIT_S`); timeout_s: an attempt that runs longer
    ends with :class:`CellTimeout` (None: no limit).
    """

    max_retries: int = 0
    backoff_s: float = 0.0
    timeout_s: float | None = None

    MAX_WAIT_S = 60.0

    def wait_before(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...)."""
        return min(self.MAX_WAIT_S, self.backoff_s * 2.0 ** (retry - 1))

    def worst_case_s(self) -> float | None:
        """The longest a cell can take under this policy (every attempt timed out, every wait
        taken), or None without a timeout: past it, the cell ignored its timeout."""
        if self.timeout_s is None:
            return None
        waits = sum(self.wait_before(r) for r in range(1, self.max_retries + 1))
        return self.timeout_s * (self.max_retries + 1) + waits


NO_RETRY = RetryPolicy()



@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CellTimeout` in this thread if the body runs longer than ``seconds`` (a
    real-time interval timer, SIGALRM). Python code is interrupted between bytecodes, so a loop
    in Python, ``time.sleep`` or a wait on a lock ends; code stuck in C without returning to
    Python does not (the forked workers' driver kills such a worker, :mod:`cell_workers`).
    No-op for None or off the main thread (signals reach only the main thread)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise CellTimeout(f"the cell ran longer than compute.cell_timeout_s = {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
