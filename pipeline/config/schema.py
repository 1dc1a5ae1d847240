"""A JSON schema of the whole params file, for editors (completion and checking as you type).

Built from the sections (:mod:`pipeline.config.sections`) and every registered entry's options
model (:mod:`pipeline.config.entries`): ``loss_options.<loss>``, ``schedule_options.<schedule>``,
``arch_options.<arch>`` and, keyed on ``data.name``, ``data.options`` and ``data.augment``. The
grid's names are enumerated. ``partial=True`` drops every ``required`` list: the schema of a
profile, which holds only the keys it changes. ``cbench schema`` prints it; the repository keeps
``params.schema.json`` and ``profiles/schema.json`` (a test checks they are current).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.config.entries import entries, option_model
from pipeline.config.sections import OBJECTIVES, Params
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from pipeline.losses.registry import LOSSES
from pipeline.losses.schedules import SCHEDULES

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _hoist(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """An entry's schema with its own ``$defs`` moved to the root's."""
    defs.update(schema.pop("$defs", {}))
    return schema


def _options_of(cls: type, overrides: Mapping[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    return _hoist(option_model(cls, overrides).model_json_schema(), defs)


def _drop_required(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_required(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_drop_required(v) for v in node]
    return node


def json_schema(partial: bool = False) -> dict[str, Any]:
    """The schema of ``params.yaml`` (``partial``: of a profile)."""
    schema = Params.model_json_schema()
    defs = schema.setdefault("$defs", {})
    props = schema["properties"]
    named: dict[str, dict[str, Any]] = {"loss_options": {}, "schedule_options": {},
                                        "arch_options": {}}
    data_cases: dict[str, dict[str, Any]] = {}
    for section, name, cls, overrides in entries():
        if section in named:
            named[section][name] = _options_of(cls, overrides, defs)
        else:
            key = section.split(".")[1]
            data_cases.setdefault(name, {})[key] = _options_of(cls, overrides, defs)
    for section, by_name in named.items():
        props[section] = {"type": "object", "properties": by_name, "additionalProperties": False,
                          "description": "per name, its options (defaults fill the rest)"}
    data = defs["DataConfig"]
    data["properties"]["name"]["enum"] = sorted(DATASETS)
    data["allOf"] = [{"if": {"properties": {"name": {"const": name}}, "required": ["name"]},
                      "then": {"properties": case}} for name, case in sorted(data_cases.items())]
    grid = defs["GridConfig"]["properties"]
    for axis, allowed in (("objective", OBJECTIVES), ("loss", LOSSES), ("arch", ENCODERS),
                          ("tau_schedule", SCHEDULES)):
        grid[axis]["items"] = {"type": "string", "enum": sorted(allowed)}
    schema["$schema"] = DRAFT
    schema["title"] = "contrastive-bench params" + (" (profile)" if partial else "")
    return _drop_required(schema) if partial else schema
