"""``results.json``: every cell of a release, machine-readable, with its JSON Schema.

One record per cell of the grid: its configuration (the grid axes), its identity (cell id,
training id, version, code fingerprint, dataset digest, params hash), its status and the reason
when it failed, its headline metrics each with the interval the cell itself has and what that
interval is over, and its cost (wall and training seconds, samples per second, peak memory,
device, energy where measured). The metrics are the registry's base
metrics (:mod:`pipeline.metrics`) that the grid measured; derived columns (controls, layers,
representations) stay in ``cells.csv``, which ships beside it.

An interval of one cell is never over seeds (a cell is one seed): it is over the held-out rows
or anchors (measurement of a fixed encoder) or a spread over coordinates, as
:data:`pipeline.metrics.CELL_INTERVALS` names it. Intervals over seeds are the leaderboard's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import CELL_INTERVALS, METRICS
from pipeline.report.grid.tables import plain

SCHEMA_ID = "https://contrastive-bench.invalid/schema/results-1.json"
FORMAT = "contrastive-bench/results@1"
IDENTITY = ("cell_id", "training_id", "version", "code_fingerprint", "dataset_hash",
            "params_hash", "git_sha")
STATUSES = ("ok", "failed", "pending", "stale")


# what a cell cost (cells.csv, from its cell.json: pipeline/runtime/cells/cost.py); null or "" where
# the cell did not record it (energy: "not measured" in energy_source)
COST_NUMBERS = ("wall_seconds", "train_seconds", "samples_per_second", "peak_rss_bytes",
                "cuda_peak_bytes", "energy_joules")
COST_TEXT = ("hardware", "device", "energy_source")


def _number(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _plain(value: Any) -> Any:
    """A grid value as JSON has it (numpy scalars to Python, NaN to None)."""
    value = plain(value)
    return None if isinstance(value, float) and not math.isfinite(value) else value


def headline_metrics(columns: list[str]) -> list[str]:
    """The registry's base metrics present among ``columns``, in the registry's order."""
    return [name for name in METRICS if name in columns]


def _metric(row: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    value = _number(row.get(name))
    if value is None:
        return None
    out: dict[str, Any] = {"value": value}
    lo, hi, se = (_number(row.get(f"{name}_{s}")) for s in ("lo", "hi", "se"))
    over = CELL_INTERVALS.get(name)
    if lo is not None and hi is not None and over:
        out["interval"] = {"lo": lo, "hi": hi, "over": over}
    elif se is not None and over:
        out["se"] = {"value": se, "over": over}
    return out


def cell_records(cells: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per row of ``cells.csv`` (see the module docstring), sorted by cell id."""
    names = headline_metrics(list(cells.columns))
    axes = [a for a in GRID_AXES if a in cells.columns]
    records = []
    for row in cells.sort_values("cell_id").to_dict("records"):
        metrics = {n: m for n in names if (m := _metric(row, n)) is not None}
        records.append({
            "config": {a: _plain(row[a]) for a in axes},
            "identity": {key: _text(row.get(key)) for key in IDENTITY},
            "status": _text(row.get("status")) or "pending",
            "reason": _text(row.get("reason")),
            "metrics": metrics,
            "cost": {**{k: _number(row.get(k)) for k in COST_NUMBERS},
                     **{k: _text(row.get(k)) for k in COST_TEXT}},
            "reproduced": _text(row.get("reproduced")),
        })
    return records


def results_document(cells: pd.DataFrame, release: str) -> dict[str, Any]:
    """The whole ``results.json``: its format, the release it belongs to, the cells."""
    return {"format": FORMAT, "release": release, "cells": cell_records(cells)}


def _interval_schema() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["lo", "hi", "over"],
            "properties": {"lo": {"type": "number"}, "hi": {"type": "number"},
                           "over": {"type": "string", "minLength": 1}}}


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``results.json`` (``cbench schema --results``)."""
    metric = {"type": "object", "additionalProperties": False, "required": ["value"],
              "properties": {"value": {"type": "number"}, "interval": _interval_schema(),
                             "se": {"type": "object", "additionalProperties": False,
                                    "required": ["value", "over"],
                                    "properties": {"value": {"type": "number", "minimum": 0},
                                                   "over": {"type": "string", "minLength": 1}}}}}
    names = list(METRICS)
    hex_id = {"type": "string", "pattern": "^[0-9a-f]*$"}
    cell = {
        "type": "object", "additionalProperties": False,
        "required": ["config", "identity", "status", "reason", "metrics", "cost", "reproduced"],
        "properties": {
            "config": {"type": "object", "required": ["loss", "seed"],
                       "propertyNames": {"enum": list(GRID_AXES)}},
            "identity": {"type": "object", "additionalProperties": False,
                         "required": list(IDENTITY),
                         "properties": {key: ({"type": "string", "minLength": 1}
                                              if key == "cell_id" else
                                              hex_id if key != "git_sha" else {"type": "string"})
                                        for key in IDENTITY}},
            "status": {"enum": list(STATUSES)},
            "reason": {"type": "string"},
            "metrics": {"type": "object", "propertyNames": {"enum": names},
                        "additionalProperties": metric},
            "cost": {"type": "object", "additionalProperties": False,
                     "required": ["wall_seconds", "hardware"],
                     "properties": {**{k: {"type": ["number", "null"], "minimum": 0}
                                       for k in COST_NUMBERS},
                                    **{k: {"type": "string"} for k in COST_TEXT}}},
            "reproduced": {"type": "string"},
        },
    }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "contrastive-bench release results", "type": "object",
            "additionalProperties": False, "required": ["format", "release", "cells"],
            "properties": {"format": {"const": FORMAT}, "release": {"type": "string"},
                           "cells": {"type": "array", "items": cell}}}


def validate(document: Mapping[str, Any]) -> list[str]:
    """Every way ``document`` breaks :func:`schema`, one line each (empty: valid)."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
