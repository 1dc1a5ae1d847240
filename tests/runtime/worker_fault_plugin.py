"""Plugin losses for tests/runtime/test_cell_workers.py: InfoNCE whose worker process dies.

- ``worker_killer``: on its first call in a process, the process SIGKILLs itself while
  ``$CBENCH_KILL_DIR`` holds fewer than ``$CBENCH_KILL_TIMES`` marks (it leaves one first), as
  a worker lost to the OOM killer would; afterwards, plain InfoNCE.
- ``worker_sleeper``: on its first call in a process, leaves a mark naming its pid in
  ``$CBENCH_KILL_DIR`` and sleeps ten minutes (a cell still training when its stage dies).

The environment's real failures, raised by the real calls that fail (not made-up messages),
while ``$CBENCH_FAULT_DIR`` holds fewer than ``$CBENCH_FAULT_TIMES`` marks (one left per
failure), then plain InfoNCE:

- ``torch_oom``: torch's CPU allocator under an address-space limit (``RLIMIT_AS``) just above
  what the process holds: "DefaultCPUAllocator: can't allocate memory";
- ``memory_error``: Python's ``MemoryError`` under the same limit;
- ``too_many_files``: opening files under a ``RLIMIT_NOFILE`` just above the open ones: EMFILE;
- ``hang``: sleeps ten minutes (a hung cell; ``compute.cell_timeout_s`` ends it);
- ``hang_in_c``: the same with SIGALRM blocked, as in C code the timeout cannot reach;
- ``shape_error``: the cell's own bug, a matmul of the wrong shapes (every time).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
from pathlib import Path

import torch

from pipeline.losses import LOSSES, LossSpec, infonce

_called: set[str] = set()


def _first(name: str) -> bool:
    key = f"{name}/{os.getpid()}"
    if key in _called:
        return False
    _called.add(key)
    return True


def _killer(batch, tau, options):
    folder = Path(os.environ["CBENCH_KILL_DIR"])
    if _first("killer") and len(list(folder.glob("killed-*"))) < int(
            os.environ["CBENCH_KILL_TIMES"]):
        (folder / f"killed-{os.getpid()}").touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _sleeper(batch, tau, options):
    if _first("sleeper"):
        (Path(os.environ["CBENCH_KILL_DIR"]) / f"sleeping-{os.getpid()}").touch()
        time.sleep(600)
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _fault_due() -> bool:
    folder = Path(os.environ["CBENCH_FAULT_DIR"])
    marks = len(list(folder.glob("fault-*")))
    if marks >= int(os.environ["CBENCH_FAULT_TIMES"]):
        return False
    (folder / f"fault-{os.getpid()}-{marks}").touch()
    return True


@contextlib.contextmanager
def _limit(which: int, soft: int):
    """``which``'s soft limit set to ``soft`` for the body, restored after."""
    before = resource.getrlimit(which)
    resource.setrlimit(which, (soft, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(which, before)


def _address_space_now() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _torch_oom(batch, tau, options):
    if _fault_due():
        with _limit(resource.RLIMIT_AS, _address_space_now() + (64 << 20)):
            torch.empty(1 << 34, dtype=torch.uint8)  # 16 GiB: the allocator refuses
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _memory_error(batch, tau, options):
    if _fault_due():
        with _limit(resource.RLIMIT_AS, _address_space_now() + (64 << 20)):
            bytearray(1 << 34)
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _too_many_files(batch, tau, options):
    if _fault_due():
        opened = []
        try:
            with _limit(resource.RLIMIT_NOFILE, len(os.listdir("/proc/self/fd")) + 4):
                while True:
                    opened.append(open(os.devnull))  # noqa: SIM115 — closed below
        finally:
            for f in opened:
                f.close()
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _hang(batch, tau, options):
    if _fault_due():
        time.sleep(600)
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _hang_in_c(batch, tau, options):
    if _fault_due():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(600)
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


def _shape_error(batch, tau, options):
    d = batch.anchor.shape[-1]
    return (batch.anchor @ torch.ones(d + 1, 2)).sum()  # (n, d) @ (d + 1, 2): the cell's own


LOSSES["torch_oom"] = LossSpec(fn=_torch_oom)
LOSSES["memory_error"] = LossSpec(fn=_memory_error)
LOSSES["too_many_files"] = LossSpec(fn=_too_many_files)
LOSSES["hang"] = LossSpec(fn=_hang)
LOSSES["hang_in_c"] = LossSpec(fn=_hang_in_c)
LOSSES["shape_error"] = LossSpec(fn=_shape_error)
LOSSES["worker_killer"] = LossSpec(fn=_killer)
LOSSES["worker_sleeper"] = LossSpec(fn=_sleeper)
