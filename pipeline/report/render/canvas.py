"""The figures' shared canvas: matplotlib on the Agg backend, and :func:`save`, which renders a
figure once into a :class:`Drawing` (its PNG and SVG bytes; SVG without a date and with a fixed
hash salt, so reruns give the same bytes). Every module that draws imports this one; the
dispatcher over the report's figures is :mod:`pipeline.report.render.figures`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@dataclass(frozen=True)
class Drawing:
    """A figure rendered once: its PNG (150 dpi) and SVG bytes. The same bytes are written to
    ``<stem>.{png,svg}`` and embedded in the HTML page."""

    png: bytes = field(repr=False)
    svg: bytes = field(repr=False)

    def write(self, path_stem: Path) -> list[Path]:
        """The bytes as ``<stem>.png`` and ``<stem>.svg`` (parents created); returns the paths."""
        stem = Path(path_stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        png, svg = stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".svg")
        png.write_bytes(self.png)
        svg.write_bytes(self.svg)
        return [png, svg]


def save(fig: plt.Figure) -> Drawing:
    """Render ``fig`` as PNG (150 dpi) and SVG (no date, a fixed hash salt: reruns give the
    same bytes), close it."""
    if fig.get_layout_engine() is None:  # figures made with layout="constrained" keep theirs
        fig.tight_layout()
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=150, metadata={"Software": None})
    with plt.rc_context({"svg.hashsalt": "contrastive-bench"}):
        fig.savefig(svg, format="svg", metadata={"Date": None})
    plt.close(fig)
    return Drawing(png.getvalue(), svg.getvalue())


__all__ = ["Drawing", "plt", "save"]
