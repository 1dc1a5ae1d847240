"""Benchmark: blocked similarity-search cross-entropy CE_m against a blocked-matmul floor.

    python bench/search.py [--m 20000] [--d 128] [--p 16] [--block 1024] [--repeats 3]
                           [--dtype float64 float32] [--threads 2]

engine: pipeline.search.similarity_search_cross_entropy(z, pool, log_ratio, tau, block, dtype)
    (row blocks on `threads` worker threads, one intra-op thread each) with m anchors and m pool
    points (embeddings (m, d), random Gaussian, normalised inside) and
    the Gaussian-channel log density ratio log r(x, ξ) (A_c = 0.6, inputs x, ξ ~ N(0, I_p)) given
    as a callable (rows, cols) -> tile that evaluates the closed form
        log r = A_c/(1−A_c²)·x·ξ − A_c²(‖x‖² + ‖ξ‖²)/(2(1−A_c²)) − (p/2)·log(1 − A_c²)
    as one (p+2)-wide matmul per tile into a buffer per thread. The ratio tiles are INCLUDED in
    the engine's time; their
    own time (the callable over all tiles, nothing else) is printed as "ratio tiles".
floor: the same 2·m·m·d matrix-multiply flops as torch.matmul over the same (block × block)
    tiles of (m, d) operands, into a preallocated output, in the same dtype, with `threads`
    intra-op threads.
Medians over repeats, engine and floor interleaved so that load from other processes hits both.
Target: engine / floor ≤ 2.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

# Idle OpenMP threads sleep instead of spinning (see bench/stats.py). Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.search import SearchCE, similarity_search_cross_entropy  # noqa: E402

T = TypeVar("T")


def channel_log_ratio(x: torch.Tensor, xi: torch.Tensor, a_c: float, block: int):
    """A (rows, cols) -> (b, c) callable for the Gaussian-channel log r, as one matmul per tile."""
    p = x.shape[1]
    v = 1.0 - a_c * a_c
    row = -0.5 * p * math.log(v) - a_c * a_c * (x * x).sum(1, keepdim=True) / (2 * v)
    col = -a_c * a_c * (xi * xi).sum(1, keepdim=True) / (2 * v)
    left = torch.cat([x * (a_c / v), row, torch.ones_like(row)], dim=1)
    right = torch.cat([xi, torch.ones_like(col), col], dim=1)
    # The engine consumes each tile before asking its thread's next one: one buffer per thread.
    local = threading.local()

    def tile(rows: slice, cols: slice) -> torch.Tensor:
        if not hasattr(local, "out"):
            local.out = x.new_empty(block * block)
        lhs, rhs = left[rows], right[cols]
        out = local.out[: lhs.shape[0] * rhs.shape[0]].view(lhs.shape[0], -1)
        return torch.mm(lhs, rhs.T, out=out)

    return tile


def check_ratio(x: np.ndarray, xi: np.ndarray, a_c: float, tile) -> float:
    """Largest deviation of the matmul form from the textbook log-density difference (8 × 8)."""
    v = 1.0 - a_c * a_c
    p = x.shape[1]
    diff = xi[None, :8, :] - a_c * x[:8, None, :]
    direct = (
        -0.5 * p * math.log(v) - (diff**2).sum(-1) / (2 * v) + 0.5 * (xi[None, :8, :] ** 2).sum(-1)
    )
    return float(np.abs(tile(slice(0, 8), slice(0, 8)).double().numpy() - direct).max())


def floor(a: torch.Tensor, b: torch.Tensor, block: int) -> None:
    out = a.new_empty(block * block)
    m = a.shape[0]
    for r0 in range(0, m, block):
        ar = a[r0 : r0 + block]
        for c0 in range(0, m, block):
            bc = b[c0 : c0 + block]
            torch.matmul(ar, bc.T, out=out[: ar.shape[0] * bc.shape[0]].view(ar.shape[0], -1))


def ratio_only(tile, m: int, block: int) -> None:
    for r0 in range(0, m, block):
        for c0 in range(0, m, block):
            tile(slice(r0, min(r0 + block, m)), slice(c0, min(c0 + block, m)))


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(args: argparse.Namespace, dtype: torch.dtype) -> float:
    gen = torch.Generator().manual_seed(0)  # drawn in float64 and cast: same data in any dtype
    z = torch.randn(args.m, args.d, generator=gen, dtype=torch.float64).to(dtype)
    pool = torch.randn(args.m, args.d, generator=gen, dtype=torch.float64).to(dtype)
    x = torch.randn(args.m, args.p, generator=gen, dtype=torch.float64)
    xi = torch.randn(args.m, args.p, generator=gen, dtype=torch.float64)
    tile = channel_log_ratio(x.to(dtype), xi.to(dtype), args.a_c, args.block)
    print(
        f"[{dtype}] closed-form log r vs direct formula: max |diff| = "
        f"{check_ratio(x.numpy(), xi.numpy(), args.a_c, tile):.1e}"
    )
    times: dict[str, list[float]] = {"engine": [], "floor": [], "ratio tiles": []}
    ces: list[SearchCE] = []
    for _ in range(args.repeats):
        t, result = timed(
            lambda: similarity_search_cross_entropy(
                z, pool, tile, args.tau, args.block, dtype=dtype
            )
        )
        ces.append(result)
        times["engine"].append(t)
        times["floor"].append(timed(lambda: floor(z, pool, args.block))[0])
        times["ratio tiles"].append(timed(lambda: ratio_only(tile, args.m, args.block))[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    ce = ces[-1]
    flops = 2.0 * args.m * args.m * args.d
    print(f"[{dtype}] CE_m = {ce.ce:.10f} (se {ce.se:.2e})")
    for k, v in med.items():
        print(
            f"[{dtype}] {k:12s} median {v:7.3f} s  (all: {', '.join(f'{t:.3f}' for t in times[k])})"
        )
    best = {k: min(v) for k, v in times.items()}
    print(
        f"[{dtype}] floor rate {flops / med['floor'] / 1e9:.1f} GFLOP/s; engine / floor = "
        f"{med['engine'] / med['floor']:.2f} (medians; target <= 2), "
        f"{best['engine'] / best['floor']:.2f} (fastest runs)"
    )
    return float(ce.ce)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--m", type=int, default=20000)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--p", type=int, default=16, help="input dimension of the channel")
    parser.add_argument("--a-c", type=float, default=0.6)
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dtype", nargs="+", default=["float64", "float32"], choices=["float64", "float32"]
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"m = {args.m} anchors = pool points, d = {args.d}, p = {args.p}, tau = {args.tau}, "
        f"block = {args.block}, threads = {args.threads}, repeats = {args.repeats}"
    )
    results = {name: run(args, getattr(torch, name)) for name in args.dtype}
    if len(results) == 2:
        print(
            f"|CE_m(float32) − CE_m(float64)| = {abs(results['float32'] - results['float64']):.2e}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
