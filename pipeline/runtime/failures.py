"""Why a cell failed: its own computation, or the environment it ran in.

- ``cell``: the cell's own computation failed — the loss diverged, the loss or model code raised.
  Running it again on the same config and code fails again, so the failure is recorded and not
  retried until the config or the code (its version) changes.
- ``environment``: where it ran failed it — no such device, out of memory, a full disk, an I/O
  error, a lost worker or node, a resource request no node can meet. The failure is recorded
  with its class and retried on the next run (on another node, with other ``compute.*``).

An unknown exception is the cell's own: a retry loop on a deterministic bug would hide it.
"""

from __future__ import annotations

import errno

from pipeline.encoders.device import DeviceUnavailableError

CELL = "cell"
ENVIRONMENT = "environment"
CLASSES = (CELL, ENVIRONMENT)

# OSError numbers that say the machine failed the cell: disk full or quota, I/O, a lost mount
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM,
                                 errno.ESTALE, errno.ENODEV, errno.ENXIO, errno.ETIMEDOUT,
                                 errno.ECONNRESET, errno.ENETDOWN, errno.EHOSTUNREACH})
# words of a RuntimeError raised by CUDA or the allocator, not by the model's own code
_ENVIRONMENT_WORDS = ("out of memory", "cuda error", "cudnn_status", "cublas_status",
                      "no cuda gpus are available", "device-side assert", "nccl error")


def classify(err: BaseException) -> str:
    """:data:`CELL` or :data:`ENVIRONMENT` for an exception that stopped a cell."""
    if isinstance(err, DeviceUnavailableError | MemoryError):
        return ENVIRONMENT
    if type(err).__name__ in ("OutOfMemoryError", "RayError", "WorkerCrashedError",
                              "NodeDiedError", "ObjectLostError", "TaskUnschedulableError",
                              "ActorUnschedulableError", "RaySystemError"):
        return ENVIRONMENT  # torch.cuda.OutOfMemoryError and Ray's lost-worker errors, by name
    if isinstance(err, OSError) and err.errno in _ENVIRONMENT_ERRNOS:
        return ENVIRONMENT
    if isinstance(err, RuntimeError) and any(w in str(err).lower() for w in _ENVIRONMENT_WORDS):
        return ENVIRONMENT
    return CELL
