"""``params.tracked.yaml``: what DVC tracks of the resolved params, and of the code.

The grid axes, and one digest per stage of ``dvc.yaml`` over the values it reads
(:data:`READS`) and the code it runs (:func:`pipeline.config.code.code_digest`: every project
file ``stages.<stage>`` imports). Each stage declares its digest (``stages.<stage>``; train also
``grid``), so DVC reruns it exactly when one of those values or files changes, and ``dvc exp
show`` lists the grid axes and one column per stage rather than every option and every module.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pipeline.config.code import code_digest

# What each stage of dvc.yaml reads of the resolved params besides the grid axes: whole sections
# by name, single keys dotted. tests/test_dvc_deps.py checks that every stage declares its digest.
READS = {
    "prepare": ("data",),
    "train": ("plugins", "data", "loss_options", "schedule_options", "arch_options", "train",
              "stats.epochs", "tracking"),
    "stats": ("stats", "train.epochs", "report.level"),
    "search": ("search",),
    "bounds": ("bounds",),
    "probe": ("probe", "data.name", "report.level"),
    "geometry": ("geometry",),
    "report": ("report", "data.name", "train.epochs", "tracking"),
}


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _value(resolved: dict[str, Any], key: str) -> Any:
    node = resolved
    for part in key.split("."):
        node = node[part]
    return node


def tracked(resolved: dict[str, Any]) -> dict[str, Any]:
    """What DVC tracks of the resolved params and the code (see the module docstring)."""
    return {"grid": resolved["grid"],
            "stages": {stage: digest({"params": {key: _value(resolved, key) for key in keys},
                                      "code": code_digest(f"stages.{stage}")})
                       for stage, keys in READS.items()}}
