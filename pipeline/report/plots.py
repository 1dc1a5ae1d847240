"""Figures of the default report (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def metric_vs_k(board: pd.DataFrame, metric: str, path: Path, ylabel: str) -> None:
    """One line per (loss, arch, τ): ``metric`` against k (log x axis)."""
    ok = board[(board.status == "ok") & board[metric].notna()] if metric in board else board.iloc[:0]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for (loss, arch, tau), part in ok.groupby(["loss", "arch", "tau"]):
        part = part.groupby("k", as_index=False)[metric].mean().sort_values("k")
        ax.plot(part.k, part[metric], marker="o", label=f"{loss} · {arch} · τ={tau:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("negatives k")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(ok):
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
