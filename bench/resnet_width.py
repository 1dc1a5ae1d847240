"""Benchmark: what ``arch_options.resnet18.width`` and bf16 autocast cost per training step.

    python bench/resnet_width.py [--batch 256] [--repeats 5] [--threads 1] [--shape 1 28 28]

One Adam step (forward, a loss on the head, backward, step) of ResNet-18 with the small stem on
random images of ``--shape``, for widths 64, 32 and 16, in float32 and under CPU bf16 autocast
(``train.precision: bfloat16``). Prints views per second, the median of ``--repeats`` timed steps
after one warm-up step, and the ratio against width 64 in float32 measured in the same run (the
machine is shared: compare ratios, not absolute rates).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pipeline.encoders.registry import make_encoder

SETTINGS = ((64, False), (32, False), (16, False), (64, True), (32, True), (16, True))


def step_seconds(width: int, bf16: bool, batch: int, shape: tuple[int, ...],
                 repeats: int) -> float:
    """The median time of one training step on ``batch`` images."""
    model = make_encoder("resnet18", shape, 128, {"width": width, "small_stem": True})
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x = torch.rand(batch, *shape)
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            z = model(x)
        loss = z.float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i:  # the first step allocates and picks kernels
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", type=int, nargs=3, default=[1, 28, 28])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shape = tuple(args.shape)
    base = None
    print(f"ResNet-18, small stem, {shape} images, batch {args.batch}, {args.threads} thread(s), "
          f"median of {args.repeats} steps")
    for width, bf16 in SETTINGS:
        seconds = step_seconds(width, bf16, args.batch, shape, args.repeats)
        rate = args.batch / seconds
        base = base or rate
        print(f"width {width:3d} {'bf16' if bf16 else 'fp32'}: {rate:8.1f} views/s "
              f"({rate / base:5.2f}x width 64 fp32)", flush=True)


if __name__ == "__main__":
    main()
