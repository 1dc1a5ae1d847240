"""Benchmark: training throughput of an image encoder per precision and memory format.

    python bench/train_throughput.py [--arch resnet18] [--size 32] [--batch 64] [--threads 2]
                                     [--repeats 5] [--steps 3] [--device cpu]

One training step = forward + backward + SGD step of the project's
ResNet-18 (``pipeline.encoders``, small-image stem, 3 input channels, 128-d output, loss = mean
square of the output) on a batch of random ``--size``×``--size`` images, in each setting the
pipeline trains with (``train.precision`` × ``train.memory_format``, applied exactly as
``pipeline.train`` applies them). The step is ``pipeline.encoders.device.encoder_step``, the one
``train.precision: auto`` measures:

- fp32: float32, contiguous (the default);
- fp32 channels_last;
- bf16 autocast: the forward under ``torch.autocast(<device>, bfloat16)``, float32 weights;
- bf16 + channels_last.

Each setting has its own copy of the same initial weights. After two warm-up steps per setting,
a sample is the mean time of ``--steps`` consecutive steps; settings take turns sample by sample
(``--repeats`` rounds), so load from other work hits all of them alike; each sample follows one
untimed step of its own setting, so no sample includes the switch from another setting (a
training run never switches). On a machine shared with other work, two-thread bf16 steps
suffer most from it (more, shorter parallel regions): compare with ``--threads 1``. Printed:
images per
second (median over the samples, and the range), and the ratio of each median to fp32's, all
from this one run. It also prints what ``train.precision: auto`` / ``memory_format: auto`` would
choose from these numbers (the fastest setting if it beats fp32 by AUTO_MARGIN, else fp32).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning (a shared 2-core machine): set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.encoders import make_encoder  # noqa: E402
from pipeline.encoders.device import (  # noqa: E402
    AUTO_MARGIN,
    device_name,
    encoder_step,
)

SETTINGS = {  # label -> (train.precision, train.memory_format)
    "fp32": ("float32", "contiguous"),
    "fp32 channels_last": ("float32", "channels_last"),
    "bf16 autocast": ("bfloat16", "contiguous"),
    "bf16 + channels_last": ("bfloat16", "channels_last"),
}


def cpu_flags() -> str:
    """The bf16-relevant flags of this CPU (from /proc/cpuinfo), e.g. 'avx512_bf16 amx_bf16'."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    wanted = ("avx512_bf16", "amx_bf16", "amx_tile", "avx512f", "avx2")
    return " ".join(f for f in wanted if f in flags) or "none of " + " ".join(wanted)


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Images per second of every setting, one entry per sample."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = make_encoder(args.arch, (3, args.size, args.size), 128,
                         {"small_stem": True} if args.arch == "resnet18" else {})
    # the step `train.precision: auto` measures: a private copy, random inputs, one SGD step
    step_in = encoder_step(model, (3, args.size, args.size), args.batch, device)
    steps = {label: step_in(p, f) for label, (p, f) in SETTINGS.items()}
    for step in steps.values():
        for _ in range(2):
            step()
    rates: dict[str, list[float]] = {label: [] for label in SETTINGS}
    for _ in range(args.repeats):
        for label, step in steps.items():
            step()  # untimed: the sample starts in this setting's steady state
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            rates[label].append(args.batch * args.steps / (time.perf_counter() - start))
    return rates


def report(rates: dict[str, list[float]]) -> str:
    base = statistics.median(rates["fp32"])
    lines = ["| setting | img/s (median) | range | ratio to fp32 |", "|---|---|---|---|"]
    for label, values in rates.items():
        med = statistics.median(values)
        lines.append(f"| {label} | {med:.1f} | {min(values):.1f}–{max(values):.1f} | "
                     f"{med / base:.2f} |")
    best = max(rates, key=lambda k: statistics.median(rates[k]))
    pick = best if statistics.median(rates[best]) >= (1 + AUTO_MARGIN) * base else "fp32"
    lines.append(f"\ntrain.precision/memory_format: auto would train in {pick!r} "
                 f"({'/'.join(SETTINGS[pick])}; it leaves fp32 only for >= "
                 f"{AUTO_MARGIN:.0%} more img/s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"{args.arch} at {args.size}x{args.size}, batch {args.batch}, forward+backward+SGD step, "
          f"{args.threads} threads, {args.repeats} samples of {args.steps} steps per setting")
    print(f"device: {device_name(device)}; CPU flags: {cpu_flags()}; torch {torch.__version__}; "
          f"{platform.node()}")
    print(report(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
