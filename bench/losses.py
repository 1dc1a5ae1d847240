"""Benchmark: forward + backward time of every loss, as ratios measured in the same run.

    python bench/losses.py [--repeats 5] [--batches 256 1024 4096] [--dim 128] [--threads 2]
                           [--clock wall|cpu]

CPU, float32, torch.set_num_threads(threads). Inputs are leaf tensors with requires_grad, built
outside the timed region, as a training loop hands them over; one call = loss + backward.
Medians over repeats, interleaved so that load from other processes hits all variants alike;
a sample of a call shorter than 50 ms is the mean of back-to-back calls lasting about 50 ms.
``--clock cpu`` times with the process CPU clock instead of the wall clock: with ``--threads 1``
it is the view to use on a machine shared with other jobs (wall times there swing by 10×; with
more threads the CPU clock also counts OpenMP spin-waiting).

What each row computes, at batch B and k = min(B − 1, 255):
- nt_xent:  pipeline nt_xent(z1, z2), 2B anchors × (2B − 1) candidates (three (B, B) blocks,
            fused backward); vs `naive` (one (2B, 2B) similarity, −inf diagonal, cross_entropy;
            written here) and vs lightly's NTXentLoss (same value, no memory bank).
- infonce:  the baseline, anchor/positive (B, d), negatives (B, k, d): B × (1 + k) logits.
- dcl, weince: the same inputs and candidates as infonce (weince adds the tail fits).
- synco:    same candidate count as infonce: a per-anchor queue of k − m negatives (the registry's
            substitute for a MoCo queue) plus m = 96 synthetic negatives generated from it
            (24 interpolated, 24 extrapolated, 24 mixup, 8 noise, 8 perturbed, 8 adversarial:
            the default 4:4:4:1:1:1 mix), so the ratio is the cost of generating them.
- supcon, soft_supcon, y_aware, xclr: the registry's two-view form, 2B samples × (2B − 1)
            candidates, vs infonce (as asked) and vs nt_xent, which scores the same candidates.
            supcon/soft_supcon and xclr from labels (= Soft SupCon with ε = e^(−1/τ_s)) need no
            (2B, 2B) target matrix; y_aware and xclr_graph (a given (B, B) similarity graph) do.
Targets: nt_xent ≤ 0.5× lightly; dcl, supcon family, synco ≤ 1.5× infonce; weince ≤ 3× infonce.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.losses import LOSSES, LossBatch, resolve_options  # noqa: E402
from pipeline.losses.infonce import infonce, nt_xent  # noqa: E402

SYNTH = {
    "interpolated": 24,
    "extrapolated": 24,
    "mixup": 24,
    "noise": 8,
    "perturbed": 8,
    "adversarial": 8,
}
TAU = 0.1
MIN_SAMPLE_SECONDS = 0.05  # each timed sample repeats a call until it lasts about this long


def naive_nt_xent(z1: Tensor, z2: Tensor, tau: float) -> Tensor:
    """The textbook form: one (2B, 2B) similarity, self masked, cross-entropy at the partner."""
    b = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = (z @ z.T / tau).fill_diagonal_(float("-inf"))
    target = torch.cat([torch.arange(b, 2 * b), torch.arange(b)])
    return F.cross_entropy(sim, target)


def variants(
    b: int, d: int, gen: torch.Generator
) -> tuple[dict[str, Callable[[], Tensor]], list[Tensor]]:
    k = min(b - 1, 255)
    m = sum(SYNTH.values())

    def leaf(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_()

    a, p, n = leaf(b, d), leaf(b, d), leaf(b, k, d)
    labels = torch.randint(0, 10, (b,), generator=gen)
    batch = LossBatch(a, p, n, labels, generator=torch.Generator().manual_seed(0))
    y_batch = LossBatch(a, p, n, labels.float())
    g_batch = LossBatch(a, p, n, labels, similarity=torch.rand(b, b, generator=gen))
    q_batch = LossBatch(a, p, n[:, : k - m].detach(), generator=torch.Generator().manual_seed(0))
    opts = {name: resolve_options(name, None, name) for name in LOSSES}
    opts["synco"].update({f"n_{kind}": c for kind, c in SYNTH.items()})

    def reg(name: str, bt: LossBatch = batch) -> Callable[[], Tensor]:
        return lambda: LOSSES[name].fn(bt, TAU, opts[name])

    out: dict[str, Callable[[], Tensor]] = {
        "infonce": lambda: infonce(a, p, n, TAU),
        "nt_xent": lambda: nt_xent(a, p, TAU),
        "naive": lambda: naive_nt_xent(a, p, TAU),
        "dcl": reg("dcl"),
        "weince": reg("weince"),
        "synco": reg("synco", q_batch),
        "supcon": reg("supcon"),
        "soft_supcon": reg("soft_supcon"),
        "y_aware": reg("y_aware", y_batch),
        "xclr": reg("xclr"),
        "xclr_graph": reg("xclr", g_batch),
    }
    try:
        from lightly.loss import NTXentLoss

        lightly_loss = NTXentLoss(temperature=TAU)
        out["lightly"] = lambda: lightly_loss(a, p)
    except ImportError:
        pass
    return out, [a, p, n]


def time_all(
    fns: dict[str, Callable[[], Tensor]],
    leaves: list[Tensor],
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    def once(fn: Callable[[], Tensor], calls: int = 1) -> float:
        """Mean time of ``calls`` back-to-back calls (several when one call is a few ms, so
        that scheduler noise averages out within a sample)."""
        t0 = clock()
        for _ in range(calls):
            for x in leaves:
                x.grad = None
            fn().backward()
        return (clock() - t0) / calls

    calls = {name: max(1, round(MIN_SAMPLE_SECONDS / once(fn))) for name, fn in fns.items()}
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(once(fn, calls[name]))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(
        f"torch {torch.__version__}, threads {args.threads}, d {args.dim}, "
        f"repeats {args.repeats}, {args.clock} clock"
    )
    for b in args.batches:
        fns, leaves = variants(b, args.dim, torch.Generator().manual_seed(b))
        t = time_all(fns, leaves, args.repeats, clock)
        k = min(b - 1, 255)
        print(f"\nB = {b}, k = {k}: median forward+backward, ms")
        print("  " + "  ".join(f"{name} {1e3 * v:.1f}" for name, v in t.items()))
        rows: list[tuple[str, float, float | None]] = [
            ("nt_xent / naive 2Bx2B", t["nt_xent"] / t["naive"], None)]
        if "lightly" in t:
            rows.append(("nt_xent / lightly", t["nt_xent"] / t["lightly"], 0.5))
        for name, target in [("dcl", 1.5), ("weince", 3.0), ("synco", 1.5)]:
            rows.append((f"{name} / infonce", t[name] / t["infonce"], target))
        for name in ("supcon", "soft_supcon", "y_aware", "xclr", "xclr_graph"):
            rows.append((f"{name} / infonce", t[name] / t["infonce"], 1.5))
            rows.append((f"{name} / nt_xent (same 2Bx2B)", t[name] / t["nt_xent"], None))
        for label, ratio, limit in rows:
            verdict = "" if limit is None else ("  ok" if ratio <= limit else f"  > {limit}")
            print(f"  {label:34s} {ratio:6.2f}{verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
