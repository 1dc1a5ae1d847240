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

from pipeline.report.figures import plt, save


def deviation_row(loss: str, counts: Sequence[int], cosines: np.ndarray, tol: float) -> dict:
    c = len(counts)
    off = cosines[~np.eye(c, dtype=bool)]
    worst = float(np.max(np.abs(off + 1.0 / (c - 1))))
    return {"loss": loss, "class_counts": "/".join(map(str, counts)), "target": -1.0 / (c - 1),
            "mean_cosine": float(off.mean()), "max_deviation": worst, "simplex": worst <= tol}


def plot(results: Sequence[tuple[str, Sequence[int], np.ndarray]], path_stem: Path) -> list[Path]:
    """One heatmap of class-mean cosines per (loss, class counts)."""
    fig, axes = plt.subplots(1, len(results), figsize=(3.4 * len(results) + 0.8, 3.9),
                             squeeze=False)
    for ax, (loss, counts, cos) in zip(axes[0], results, strict=True):
        im = ax.imshow(cos, vmin=-1, vmax=1, cmap="coolwarm")
        for (i, j), v in np.ndenumerate(cos):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_title(f"{loss}\nclasses {'/'.join(map(str, counts))}", fontsize=9)
        ax.set_xticks(range(len(counts)))
        ax.set_yticks(range(len(counts)))
    fig.colorbar(im, ax=axes[0, -1], shrink=0.8, label="class-mean cosine")
    return save(fig, path_stem)


def table(results: Sequence[tuple[str, Sequence[int], np.ndarray]], tol: float) -> pd.DataFrame:
    return pd.DataFrame([deviation_row(loss, counts, cos, tol) for loss, counts, cos in results])
