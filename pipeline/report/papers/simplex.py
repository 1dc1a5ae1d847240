"""SupCon vs Soft SupCon on free embeddings: do the class means form a regular simplex?

Vock et al. (2026, SPEC §1): with balanced classes both losses put the C class prototypes on a
regular simplex (pairwise cosine −1/(C−1)); with imbalanced classes Soft SupCon keeps it, SupCon
does not. The table gives each run's largest deviation from −1/(C−1); the figure the matrices.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.report.render.canvas import plt, save


def deviation_row(loss: str, counts: Sequence[int], cosines: np.ndarray, tol: float) -> dict:
    c = len(counts)
    off = cosines[~np.eye(c, dtype=bool)]
    worst = float(np.max(np.abs(off + 1.0 / (c - 1))))
    return {"loss": loss, "class_counts": "/".join(map(str, counts)), "target": -1.0 / (c - 1),
            "mean_cosine": float(off.mean()), "max_deviation": worst, "simplex": worst <= tol}


def plot(results: Sequence[tuple[str, Sequence[int], np.ndarray]], path_stem: Path) -> list[Path]:
    """One heatmap of class-mean cosines per (loss, class counts): a row per loss, a column per
    class balance (in the order given)."""
    losses = list(dict.fromkeys(loss for loss, _, _ in results))
    balances = list(dict.fromkeys(tuple(counts) for _, counts, _ in results))
    fig, axes = plt.subplots(len(losses), len(balances), squeeze=False, layout="constrained",
                             figsize=(3.4 * len(balances) + 0.8, 3.6 * len(losses) + 0.3))
    for ax in axes.flat:
        ax.set_visible(False)
    for loss, counts, cos in results:
        ax = axes[losses.index(loss), balances.index(tuple(counts))]
        ax.set_visible(True)
        im = ax.imshow(cos, vmin=-1, vmax=1, cmap="coolwarm")
        for (i, j), v in np.ndenumerate(cos):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_title(f"{loss}\nclasses {'/'.join(map(str, counts))}", fontsize=9)
        ax.set_xticks(range(len(counts)))
        ax.set_yticks(range(len(counts)))
    fig.colorbar(im, ax=axes[:, -1].tolist(), shrink=0.8, label="class-mean cosine")
    return save(fig).write(path_stem)


def table(results: Sequence[tuple[str, Sequence[int], np.ndarray]], tol: float) -> pd.DataFrame:
    return pd.DataFrame([deviation_row(loss, counts, cos, tol) for loss, counts, cos in results])
