"""``params.tracked.yaml``: what DVC tracks of the resolved params.

The grid axes, a few headline settings, and one digest per section, so each stage reruns exactly
when a section it reads changes (each stage of ``dvc.yaml`` declares the digests of the sections
it reads) and ``dvc exp show`` lists the grid and the metrics rather than every option.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Sections tracked by digest: each stage declares the digests of the sections it reads.
DIGESTED = ("plugins", "data", "loss_options", "schedule_options", "arch_options", "train",
            "stats", "search", "bounds", "probe", "report", "geometry", "tracking")
HEADLINE = {"data": ("name", "n_train", "n_heldout", "seed"),
            "train": ("epochs", "lr", "optimizer", "negatives", "precision"),
            "stats": ("epochs",), "report": ("level",)}


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def tracked(resolved: dict[str, Any]) -> dict[str, Any]:
    """What DVC tracks of the resolved params (see the module docstring)."""
    out: dict[str, Any] = {"grid": resolved["grid"]}
    out |= {section: {k: resolved[section][k] for k in keys} for section, keys in HEADLINE.items()}
    out["digests"] = {section: digest(resolved[section]) for section in DIGESTED}
    return out
