"""Validate params.yaml (with a profile laid over it) and write the resolved params.

The profile comes from ``--profile`` or the ``CBENCH_PROFILE`` environment variable. Writes
``params.resolved.yaml`` (every option filled in; every later stage reads it) and
``params.tracked.yaml``, what DVC tracks: the grid axes, a few headline settings, and one digest
per section, so each stage reruns exactly when a section it reads changes and ``dvc exp show``
lists the grid and the metrics rather than every option.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

import yaml

from pipeline.config import ConfigError, expand, load
from pipeline.runtime.context import RESOLVED, TRACKED
from pipeline.runtime.storage import atomic_write_bytes

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=os.environ.get("CBENCH_PROFILE") or None)
    args = parser.parse_args(argv)
    try:
        params = load(args.params, args.profile)
        cells = expand(params)
    except ConfigError as err:
        given = args.params + (f" + {args.profile}" if args.profile else "")
        print(f"invalid params ({given}):\n{err}", file=sys.stderr)
        return 2
    resolved = params.model_dump(mode="json")
    header = f"# generated from {args.params}" + (f" + {args.profile}" if args.profile else "")
    for path, content in ((RESOLVED, resolved), (TRACKED, tracked(resolved))):
        text = yaml.safe_dump(content, sort_keys=False)
        atomic_write_bytes(path, f"{header}; do not edit\n{text}".encode())
    profile = f" (profile {args.profile})" if args.profile else ""
    print(f"params ok: {len(cells)} cells{profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
