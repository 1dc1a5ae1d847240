"""Benchmark: what ``train.deterministic: true`` costs per training step.

    python bench/deterministic.py [--arch resnet18] [--size 32] [--batch 64] [--threads 1]
                                  [--repeats 7] [--steps 3] [--device cpu]

One step is ``pipeline.encoders.device.encoder_step`` (forward + backward + SGD on a batch of
random inputs, float32, contiguous), once with PyTorch's default kernels and once inside
``pipeline.train.deterministic_kernels(True)`` (``torch.use_deterministic_algorithms``, and
``CUBLAS_WORKSPACE_CONFIG`` on CUDA). The two settings take turns sample by sample, so load from
other work hits both alike. Printed: the median seconds per step of each (and the range over the
samples), and the ratio deterministic / default from this one run. On the CPU most kernels are
deterministic already, so the ratio is near 1; on CUDA the deterministic scatter/index kernels
and the cuBLAS workspace cost more.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from pipeline.encoders.device import encoder_step  # noqa: E402
from pipeline.encoders.registry import make_encoder  # noqa: E402
from pipeline.train import deterministic_kernels  # noqa: E402


def _sample(run, steps: int, deterministic: bool) -> float:
    with deterministic_kernels(deterministic):
        run()  # untimed: the switch from the other setting is not in the sample
        start = time.perf_counter()
        for _ in range(steps):
            run()
        return (time.perf_counter() - start) / steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="resnet18", choices=["resnet18", "mlp", "linear"])
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shape = (3, args.size, args.size) if args.arch == "resnet18" else (args.size,)
    options: dict[str, dict[str, Any]] = {
        "resnet18": {}, "mlp": {"hidden": [128], "bias": True}, "linear": {"bias": False}}
    torch.manual_seed(0)
    model = make_encoder(args.arch, shape, 128, options[args.arch])
    step = encoder_step(model, shape, args.batch, device)
    runs = {False: step("float32", "contiguous"), True: step("float32", "contiguous")}
    for on, run in runs.items():  # warm-up
        _sample(run, 1, on)
    samples: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for on, run in runs.items():
            samples[on].append(_sample(run, args.steps, on))
    med = {on: statistics.median(s) for on, s in samples.items()}
    print(f"{args.arch} {shape} batch {args.batch}, {args.threads} thread(s), {device}, "
          f"median of {args.repeats} samples of {args.steps} steps")
    for on, label in ((False, "default kernels"), (True, "deterministic")):
        s = samples[on]
        print(f"  {label:16s} {med[on] * 1e3:8.2f} ms/step  (range {min(s) * 1e3:.2f}–"
              f"{max(s) * 1e3:.2f})")
    print(f"  deterministic / default: {med[True] / med[False]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
