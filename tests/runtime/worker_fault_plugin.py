"""Plugin losses for tests/runtime/test_cell_workers.py: InfoNCE whose worker process dies.

- ``worker_killer``: on its first call in a process, the process SIGKILLs itself while
  ``$CBENCH_KILL_DIR`` holds fewer than ``$CBENCH_KILL_TIMES`` marks (it leaves one first), as
  a worker lost to the OOM killer would; afterwards, plain InfoNCE.
- ``worker_sleeper``: on its first call in a process, leaves a mark naming its pid in
  ``$CBENCH_KILL_DIR`` and sleeps ten minutes (a cell still training when its stage dies).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

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


LOSSES["worker_killer"] = LossSpec(fn=_killer)
LOSSES["worker_sleeper"] = LossSpec(fn=_sleeper)
