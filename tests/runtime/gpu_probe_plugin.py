"""A plugin loss for tests/runtime/test_gpu_packing.py: InfoNCE that first records its task.

On its first call in a Ray task it writes what the task saw (``CUDA_VISIBLE_DEVICES``,
``ray.get_gpu_ids()``, the process) and then waits until ``$CBENCH_GPU_PROBE_COUNT`` tasks have
arrived in ``$CBENCH_GPU_PROBE_DIR``: a barrier, so the record proves that they all ran at once
(Ray cannot run them one after another: the barrier would time out and the cells fail).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import ray

from pipeline.losses import LOSSES, LossSpec, infonce

BARRIER_SECONDS = 300  # generous: eight workers importing torch on two busy cores
_seen: set[str] = set()


def _arrive_and_wait() -> None:
    task = ray.get_runtime_context().get_task_id()
    if task is None or task in _seen:
        return
    _seen.add(task)
    folder = Path(os.environ["CBENCH_GPU_PROBE_DIR"])
    want = int(os.environ["CBENCH_GPU_PROBE_COUNT"])
    record = {"task": task, "pid": os.getpid(),
              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
              "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "start": time.time()}
    (folder / f"{task}.arrived").touch()
    deadline = time.monotonic() + BARRIER_SECONDS
    while len(list(folder.glob("*.arrived"))) < want:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(folder.glob('*.arrived')))} of {want} tasks "
                               f"arrived within {BARRIER_SECONDS} s: they did not run at once")
        time.sleep(0.05)
    record["end"] = time.time()  # every task was running between max(start) and min(end)
    tmp = folder / f"{task}.json.tmp"
    tmp.write_text(json.dumps(record))
    tmp.rename(folder / f"{task}.json")


def _gpu_probe(batch, tau, options):
    _arrive_and_wait()
    return infonce(batch.anchor, batch.positive, batch.negatives, tau)


LOSSES["gpu_probe"] = LossSpec(fn=_gpu_probe)
