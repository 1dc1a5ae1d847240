"""Benchmark: what ``train.precision: bfloat16`` changes in a cell's numbers.

    python bench/bf16_numbers.py [--profile profiles/mnist-resnet18.yaml] [--n 1536]
                                 [--heldout 1000] [--epochs 2] [--batch 128] [--threads 2]
                                 [--bootstrap 200]

Trains one contrastive cell of the profile (ResNet-18 with the small stem on MNIST from the local
IDX files, NT-Xent with in-batch negatives, τ = 0.5, 128-d head; the profile's augmentations and
memory format) three times, each built through the config path (``pipeline.config.from_mapping``
over params.yaml with the profile and this script's sizes laid over it, then ``expand``):

- ``fp32``: ``train.precision: float32``, grid seed 0;
- ``bf16``: ``train.precision: bfloat16``, the same seed, and the fp32 cell's *id*. The precision
  is part of the cell config and so of its id, and the batch order, the augmentations and the
  negatives are drawn from (seed, cell id): a bf16 cell of the pipeline trains on other batches
  than its fp32 twin. Giving it the fp32 cell's id makes every draw the same (the initial weights
  and the training rows depend on the seed alone), so the two runs differ in the arithmetic only;
- ``fp32 seed 1``: float32, grid seed 1 (other initial weights, rows and draws): the
  seed-to-seed difference that the precision's difference is to be read against.

Of each run, on the held-out embeddings (``pipeline.train.embed_heldout``: eval mode, float32
forward whatever the training ran in) of the head (z, 128-d) and of the backbone (h, 512-d,
``backbone_views``), the statistics the stats stage reports, computed the way it computes them
(``pipeline.runtime.cells.analyses``: ``column_tests`` on the representation, then
``pipeline.stats.summary.summarize``): thin-shell CV, AD mean and pass fraction, DP mean p and
pass fraction, raw and L2-normalised; recall@1 (``pipeline.search.recall_at_k``, clean vs one
view) and the leave-one-out 5-NN accuracy; the last epoch's training loss and training images
per second (each image = two augmented views, forward + backward + Adam step, the augmentation
included). A second reference besides the seed: the 95% interval the stats stage attaches to
each statistic (``pipeline.stats.intervals.summary_intervals``: row bootstrap for CV, over the
coordinates for AD/DP), as its half-width, of the fp32 run. And how far the embeddings
themselves moved: max |z_bf16 − z_fp32| (against max |z_fp32|), the cosine of each held-out
point's two embeddings (against the cosine between a point's clean and augmented embedding in
fp32), and two rotation-free comparisons that also apply across seeds: linear CKA and the
overlap of the 10 nearest held-out neighbours.

Timings are from whatever else runs on the machine: under load they are rough.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

# Idle OpenMP threads sleep instead of spinning (a shared 2-core machine): set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import expand, from_mapping, merge, read_yaml  # noqa: E402
from pipeline.datasets import load_dataset  # noqa: E402
from pipeline.encoders.device import device_name, pick_device  # noqa: E402
from pipeline.grid import Cell  # noqa: E402
from pipeline.search import loo_majority_knn_accuracy, recall_at_k  # noqa: E402
from pipeline.seeding import numpy_generator  # noqa: E402
from pipeline.stats.column_tests import column_tests  # noqa: E402
from pipeline.stats.intervals import summary_intervals  # noqa: E402
from pipeline.stats.summary import summarize  # noqa: E402
from pipeline.train import backbone_views, embed_heldout, train_cell  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import cpu_flags  # noqa: E402  (bench/, the same flags)

STATS = ("cv", "ad_mean", "ad_pass_frac", "dp_p_mean", "dp_pass_frac")
REPS = {"raw": "", "normalized": "norm_"}  # the stats stage's representations, metric prefixes
LAYERS = {"head": "", "backbone": "backbone_"}


@dataclasses.dataclass(frozen=True)
class Run:
    label: str
    cell: Cell
    losses: list[float]
    images_per_second: float
    precision: str  # what train_cell reports it trained in
    views: dict[str, tuple[np.ndarray, np.ndarray]]  # layer -> (clean, one view), (N, d)


def make_cell(args: argparse.Namespace, precision: str, seed: int) -> Cell:
    """The one contrastive cell of the profile at this script's sizes, through the config path."""
    params = merge(read_yaml(ROOT / "params.yaml"), read_yaml(args.profile))
    over = {
        "data": {"n_train": args.n, "n_heldout": args.heldout},
        "grid": {"objective": ["contrastive"], "loss": ["nt_xent"], "k": [args.batch - 1],
                 "tau": [args.tau], "tau_schedule": ["constant"], "n": [args.n],
                 "arch": ["resnet18"], "embed_dim": [args.embed_dim],
                 "batch_size": [args.batch], "seed": [seed]},
        "train": {"epochs": args.epochs, "threads": args.threads, "precision": precision,
                  "device": "cpu"},
        # not used here; only so that the config's cross-key rules hold at small held-out sizes
        "search": {"anchors": min(params["search"]["anchors"], args.heldout // 2)},
    }
    (cell,) = expand(from_mapping(merge(params, copy.deepcopy(over))))
    return cell


def train(label: str, cell: Cell, dataset: Any) -> Run:
    result = train_cell(cell, dataset)
    seconds = sum(h.seconds for h in result.history)
    steps = (cell.n // cell.train.batch_size) * cell.train.epochs
    views = embed_heldout(result.model, dataset, cell)
    backbone = backbone_views(views)
    assert backbone is not None, "resnet18 has a backbone"
    precision = result.compute.precision if result.compute else "?"
    print(f"  {label}: cell {cell.cell_id}, trained in {precision}, {seconds:.0f} s, "
          f"loss by epoch {[round(h.loss, 4) for h in result.history]}", flush=True)
    return Run(label, cell, [h.loss for h in result.history],
               steps * cell.train.batch_size / seconds, precision,
               {"head": (views[0], views[1]), "backbone": backbone})


def represent(z: np.ndarray, rep: str) -> np.ndarray:
    """As the stats stage makes it (cell_tasks._represent): raw as read, or rows L2-normalised."""
    if rep == "raw":
        return z
    z64 = np.asarray(z, dtype=np.float64)
    return z64 / np.linalg.norm(z64, axis=1, keepdims=True)


def statistics_of(run: Run, labels: np.ndarray | None) -> dict[str, float]:
    """Metric name (the report's, e.g. ``backbone_norm_cv``) -> value."""
    out: dict[str, float] = {"final_loss": run.losses[-1],
                             "train_images_per_s": run.images_per_second}
    for layer, lp in LAYERS.items():
        z, z_pos = run.views[layer]
        for rep, rp in REPS.items():
            s = summarize(z, z_pos, column_tests(represent(z, rep)), rep)
            if s.status != "ok":  # the stats stage would report this row as failed
                # (a ReLU backbone's dead units): the statistics of the other coordinates
                keep = np.ptp(represent(z, rep), axis=0) > 0
                print(f"  {run.label} {layer} {rep}: {s.reason}; statistics of the other "
                      f"{int(keep.sum())} coordinates", flush=True)
                zk, pk = represent(z, rep)[:, keep], represent(z_pos, rep)[:, keep]
                s = summarize(zk, pk, column_tests(zk), "raw")
            # the normalised rows all have norm 1: their CV is 0 up to rounding, not a number to
            # compare
            out.update({f"{lp}{rp}{k}": getattr(s, k) for k in STATS if rp == "" or k != "cv"})
        out[f"{lp}recall_at_1"] = recall_at_k(z, z_pos, (1,))[1]
        if labels is not None:
            out[f"{lp}knn_loo_5"] = loo_majority_knn_accuracy(z, labels, 5)
    return out


def half_widths(run: Run, n_boot: int) -> dict[str, float]:
    """Half-width of the stats stage's 95% interval of each statistic of ``run``."""
    out = {}
    for layer, lp in LAYERS.items():
        z = run.views[layer][0]
        for rep, rp in REPS.items():
            zr = np.asarray(represent(z, rep), dtype=np.float64)
            zr = zr[:, np.ptp(zr, axis=0) > 0]  # as statistics_of: without constant coordinates
            rng = numpy_generator(run.cell.cell_id, "bootstrap", rep, layer)
            cis = summary_intervals(zr, column_tests(zr), n_boot, rng, 0.95)
            out.update({f"{lp}{rp}{k}": (ci.high - ci.low) / 2 for k, ci in cis.items()})
    return out


def linear_cka(a: np.ndarray, b: np.ndarray) -> float:
    """Linear CKA of two (N, d) representations of the same N inputs (Kornblith et al. 2019,
    Eq. 5): invariant to rotations and isotropic scaling, so comparable across seeds."""
    a = np.asarray(a, np.float64) - np.mean(a, axis=0)
    b = np.asarray(b, np.float64) - np.mean(b, axis=0)
    cross = np.linalg.norm(b.T @ a) ** 2
    return float(cross / (np.linalg.norm(a.T @ a) * np.linalg.norm(b.T @ b)))


def neighbour_overlap(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """Mean fraction of each point's k cosine-nearest other points shared by a and b."""
    def knn(z: np.ndarray) -> np.ndarray:
        u = np.asarray(z, np.float64)
        u = u / np.linalg.norm(u, axis=1, keepdims=True)
        sims = u @ u.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1, kind="stable")[:, :k]
    na, nb = knn(a), knn(b)
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(na, nb, strict=True)]))


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def fmt(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def stats_table(fp32: dict[str, float], bf16: dict[str, float], seed1: dict[str, float],
                ci: dict[str, float]) -> str:
    lines = ["| statistic | fp32 | bf16 | bf16 − fp32 | fp32 seed 1 | seed 1 − seed 0 "
             "| 95% CI ± (fp32) |", "|---|---|---|---|---|---|---|"]
    for key in fp32:
        lines.append(f"| {key} | {fmt(fp32[key])} | {fmt(bf16[key])} | "
                     f"{fmt(bf16[key] - fp32[key])} | {fmt(seed1[key])} | "
                     f"{fmt(seed1[key] - fp32[key])} | {fmt(ci.get(key, float('nan')))} |")
    return "\n".join(lines)


def embedding_table(fp32: Run, bf16: Run, seed1: Run) -> str:
    lines = ["| layer | max abs Δ (bf16−fp32) | max abs fp32 | cos(fp32, bf16) mean / min "
             "| cos(clean, view) fp32 mean | CKA fp32–bf16 | CKA seed0–seed1 "
             "| 10-NN overlap fp32–bf16 | 10-NN overlap seed0–seed1 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for layer in LAYERS:
        a, b, c = fp32.views[layer][0], bf16.views[layer][0], seed1.views[layer][0]
        cos = row_cosines(a, b)
        aug = row_cosines(a, fp32.views[layer][1])
        lines.append(f"| {layer} | {fmt(float(np.max(np.abs(b - a))))} | "
                     f"{fmt(float(np.max(np.abs(a))))} | {cos.mean():.5f} / {cos.min():.5f} | "
                     f"{aug.mean():.4f} | {linear_cka(a, b):.4f} | {linear_cka(a, c):.4f} | "
                     f"{neighbour_overlap(a, b):.3f} | {neighbour_overlap(a, c):.3f} |")
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=str(ROOT / "profiles/mnist-resnet18.yaml"))
    ap.add_argument("--n", type=int, default=1536, help="training images (data.n_train = grid.n)")
    ap.add_argument("--heldout", type=int, default=1000, help="held-out images")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--tau", type=float, default=0.5)
    ap.add_argument("--embed-dim", type=int, default=128)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--bootstrap", type=int, default=200, help="row resamples for CV's interval")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    fp32_cell = make_cell(args, "float32", 0)
    bf16_cell = make_cell(args, "bfloat16", 0)
    seed1_cell = make_cell(args, "float32", 1)
    # the same draws (batches, augmentations, negatives): see the module docstring
    own_id = bf16_cell.cell_id
    bf16_cell = dataclasses.replace(bf16_cell, cell_id=fp32_cell.cell_id)
    assert dataclasses.replace(bf16_cell, train=fp32_cell.train) == fp32_cell

    d = fp32_cell.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    print(f"CPU: {cpu_model()} (flags: {cpu_flags()}); device {device_name(pick_device('cpu'))}; "
          f"torch {torch.__version__}; {platform.node()}")
    print(f"profile {Path(args.profile).name}: {d.name}, {args.n} training / {args.heldout} "
          f"held-out images {dataset.input_shape}, {fp32_cell.arch} {dict(fp32_cell.arch_options)},"
          f" {fp32_cell.loss} τ={fp32_cell.tau}, {fp32_cell.embed_dim}-d, batch {args.batch}, "
          f"{args.epochs} epochs, {fp32_cell.train.optimizer} lr {fp32_cell.train.lr}, "
          f"memory format {fp32_cell.train.memory_format}, {torch.get_num_threads()} threads")
    print(f"bf16 cell trained with the fp32 cell's id {fp32_cell.cell_id} (its own would be "
          f"{own_id}: other batches and views)")
    start = time.perf_counter()
    runs = [train("fp32", fp32_cell, dataset), train("bf16", bf16_cell, dataset),
            train("fp32 seed 1", seed1_cell, dataset)]
    fp32, bf16, seed1 = (statistics_of(r, dataset.y_heldout) for r in runs)
    ci = half_widths(runs[0], args.bootstrap)
    print(f"\nheld-out statistics (N = {args.heldout}; stats-stage functions; CI: {args.bootstrap} "
          "row resamples for CV, t / Wilson over the coordinates for AD and DP)\n")
    print(stats_table(fp32, bf16, seed1, ci))
    print("\nthe embeddings themselves (clean held-out inputs)\n")
    print(embedding_table(*runs))
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
