"""Benchmark, for a GPU: images per second of one cell and of four cells packed on one GPU, bf16
off and on.

    python3 bench/gpu.py            # on a machine with CUDA: about 2-4 minutes on an H200
    python3 bench/gpu.py --cpu      # a small smoke run on the CPU (checks the script,
                                    # measures nothing useful)

Without CUDA (and without ``--cpu``) it prints that it needs a GPU and exits 0. It needs only
torch and torchvision besides the project's pure packages (no Ray, no pydantic): it runs as is on
a GPU machine's stock PyTorch image, from a checkout of this repository.

A cell is the CIFAR-10 profile's (profiles/cifar10-resnet18-gpu.yaml) at a smaller size:
ResNet-18 with the small-image stem, NT-Xent on two augmented views, batch 512, Adam — trained by
the project's own ``pipeline.train.train_cell`` on random CIFAR-shaped images (3×32×32; the
numbers do not depend on the pixels, and no data set has to be there). Settings:

- fp32: ``train.precision: float32``, ``memory_format: contiguous``;
- bf16: ``train.precision: bfloat16``, ``memory_format: channels_last`` (the fast path on tensor
  cores).

Measured, per setting:

- model step: forward + backward + Adam step of the encoder alone on one batch already on the
  GPU (two views of 512), the ceiling a cell could reach;
- 1 cell: one ``train_cell`` in this process with every CPU core for its threads;
- 4 packed: four processes on the one GPU at once (what ``compute.num_gpus: 0.25`` makes Ray
  do), each with a quarter of the cores; they start together (a barrier) after a warm-up cell,
  and the throughput is all their images over the time from the first start to the last end.

A cell's images per second count both views: 2 × batch × steps / the training loop's seconds
(epochs after the first, which includes cuDNN's autotuning). The views are augmented on the CPU
(``pipeline.datasets.augment``), so "1 cell" below "model step" means the CPU is what limits a
cell. Printed at the end: a table with the ratios packed / 1 cell and bf16 / fp32.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SETTINGS = {"fp32": ("float32", "contiguous"), "bf16": ("bfloat16", "channels_last")}


@dataclass(frozen=True)
class Size:
    n: int  # training images of a cell
    batch: int
    epochs: int  # the first is a warm-up and not counted
    heldout: int


GPU_SIZE = Size(n=20480, batch=512, epochs=3, heldout=1024)
CPU_SIZE = Size(n=256, batch=64, epochs=2, heldout=64)


def make_cell(size: Size, precision: str, memory_format: str, device: str, seed: int,
              threads: int):
    """The CIFAR profile's cell at ``size``, built without the params layer (no pydantic)."""
    from pipeline.datasets.registry import DATASETS
    from pipeline.grid import DataSpec, GridSpec
    from pipeline.grid import make_cell as grid_cell

    data = DataSpec("cifar10", size.n, size.heldout, 0, {"path": "random"},
                    dict(DATASETS["cifar10"].augment_defaults))
    train = {"epochs": size.epochs, "lr": 1e-3, "optimizer": "adam", "negatives": "in_batch",
             "threads": threads, "device": device, "precision": precision,
             "memory_format": memory_format, "deterministic": False,
             "on_code_change": "retrain"}
    spec = GridSpec(axes={}, loss_options={"nt_xent": {}},
                    arch_options={"resnet18": {"small_stem": True}},
                    schedule_options=lambda schedule, tau: {"tau": tau}, train=train, data=data)
    point = {"objective": "contrastive", "loss": "nt_xent", "k": size.batch - 1, "tau": 0.5,
             "tau_schedule": "constant", "n": size.n, "arch": "resnet18", "embed_dim": 128,
             "batch_size": size.batch, "seed": seed}
    return grid_cell(spec, point)


def random_cifar(size: Size):
    import numpy as np

    from pipeline.datasets import Dataset

    rng = np.random.default_rng(0)
    x = rng.random((size.n + size.heldout, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, 10, size.n + size.heldout)
    return Dataset("cifar10", x_train=x[:size.n], x_heldout=x[size.n:], y_train=y[:size.n],
                   y_heldout=y[size.n:], n_classes=10)


def cell_rate(size: Size, setting: str, device: str, seed: int, threads: int):
    """(images per second of the timed epochs, their images, wall start, wall end)."""
    import torch

    from pipeline.train import train_cell

    torch.set_num_threads(threads)
    cell = make_cell(size, *SETTINGS[setting], device, seed, threads)
    dataset = random_cifar(size)
    start = time.time()
    result = train_cell(cell, dataset)
    end = time.time()
    steps = size.n // size.batch
    timed = [h.seconds for h in result.history[1:]] or [h.seconds for h in result.history]
    images = 2 * size.batch * steps * len(timed)
    return images / sum(timed), images, start, end


def model_rate(size: Size, setting: str, device: str, repeats: int = 10) -> float:
    """Images per second of the encoder's training step alone, data on the device."""
    import torch

    from pipeline.encoders import make_encoder
    from pipeline.encoders.device import ComputeMode, apply_compute_mode

    dev = torch.device(device)
    precision, fmt = SETTINGS[setting]
    net = make_encoder("resnet18", (3, 32, 32), 128, {"small_stem": True}).to(dev).train()
    apply_compute_mode(net, ComputeMode(precision, fmt, (precision, fmt), "params", ""), dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.rand(2 * size.batch, 3, 32, 32, device=dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        net(x).square().mean().backward()
        opt.step()

    for _ in range(3):
        step()
    samples = []
    for _ in range(repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t = time.perf_counter()
        step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        samples.append(2 * size.batch / (time.perf_counter() - t))
    return statistics.median(samples)


def _packed_worker(size: Size, setting: str, device: str, seed: int, threads: int,
                   barrier, out) -> None:
    try:
        warm = Size(n=2 * size.batch, batch=size.batch, epochs=1, heldout=size.heldout)
        cell_rate(warm, setting, device, seed, threads)  # imports, cuDNN, allocator
        barrier.wait()
        out.put(cell_rate(size, setting, device, seed, threads))
    except BaseException as err:  # noqa: BLE001 — reported by the parent
        barrier.abort()
        out.put(f"{type(err).__name__}: {err}")


def packed_rate(size: Size, setting: str, device: str, cells: int, threads: int) -> float:
    """All images of ``cells`` concurrent cells on one device over their common wall time."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(cells), ctx.Queue()
    procs = [ctx.Process(target=_packed_worker,
                         args=(size, setting, device, 100 + i, threads, barrier, out))
             for i in range(cells)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        raise RuntimeError(f"a packed cell failed: {errors[0]}")
    images = sum(r[1] for r in results)
    # each worker's wall span includes its held-out embedding and first epoch: a lower bound
    return images / (max(r[3] for r in results) - min(r[2] for r in results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # its first paragraph
    ap.add_argument("--cpu", action="store_true", help="a small smoke run on the CPU")
    ap.add_argument("--cells", type=int, default=4, help="cells packed on the one GPU")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench/gpu.py: skipped: needs PyTorch")
        return 0
    if not args.cpu and not torch.cuda.is_available():
        print("bench/gpu.py: skipped: needs a CUDA GPU (torch.cuda.is_available() is False); "
              "python bench/gpu.py --cpu runs a small smoke test of the script on the CPU")
        return 0
    device = "cpu" if args.cpu else "cuda"
    size = CPU_SIZE if args.cpu else GPU_SIZE
    cores = os.cpu_count() or 1
    name = "CPU" if args.cpu else torch.cuda.get_device_name(0)
    print(f"{name}; torch {torch.__version__}; {cores} CPU cores; ResNet-18 32x32, batch "
          f"{size.batch}, {size.n} images x {size.epochs} epochs per cell (first not counted)",
          flush=True)
    began = time.time()
    rows = {}
    for setting in SETTINGS:
        model = model_rate(size, setting, device, repeats=3 if args.cpu else 10)
        print(f"  {setting}: model step {model:,.0f} img/s", flush=True)
        one = cell_rate(size, setting, device, 0, cores)[0]
        print(f"  {setting}: 1 cell {one:,.0f} img/s", flush=True)
        packed = packed_rate(size, setting, device, args.cells, max(1, cores // args.cells))
        print(f"  {setting}: {args.cells} packed {packed:,.0f} img/s", flush=True)
        rows[setting] = (model, one, packed)
    fp32 = rows["fp32"]
    print(f"\n| setting | model step img/s | 1 cell img/s | {args.cells} packed img/s (sum) | "
          f"packed / 1 cell | 1 cell / model step | 1 cell vs fp32 | packed vs fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    for setting, (model, one, packed) in rows.items():
        print(f"| {setting} | {model:,.0f} | {one:,.0f} | {packed:,.0f} | {packed / one:.2f} | "
              f"{one / model:.2f} | {one / fp32[1]:.2f} | {packed / fp32[2]:.2f} |")
    print(f"\n{time.time() - began:.0f} s in all. compute.num_gpus: 0.25 pays when "
          "'packed / 1 cell' is well above 1; '1 cell / model step' well below 1 means the "
          "CPU-side augmentation limits a cell.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
