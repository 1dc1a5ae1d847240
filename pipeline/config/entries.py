"""Options of the registered entries, validated through one path.

Every loss, schedule, encoder, dataset and augmentation declares its options as a frozen
dataclass (:mod:`pipeline.options`). Here each class becomes a strict pydantic model (types,
ranges, unknown keys) and the dataclass itself then checks its rules across options
(``__post_init__``). Errors name the dotted key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, get_type_hints

from pydantic import BaseModel, Field, ValidationError, create_model

from pipeline.config.sections import STRICT
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from pipeline.losses.registry import LOSSES
from pipeline.losses.schedules import SCHEDULES
from pipeline.options import OptionError

_MODELS: dict[tuple[type, tuple[tuple[str, Any], ...]], type[BaseModel]] = {}


def option_model(cls: type, overrides: Mapping[str, Any] | None = None) -> type[BaseModel]:
    """The strict pydantic model of an options dataclass (``overrides`` replace defaults)."""
    key = (cls, tuple(sorted((overrides or {}).items())))
    if key not in _MODELS:
        hints = get_type_hints(cls, include_extras=True)
        fields: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            doc = f.metadata.get("doc")
            if f.name in (overrides or {}):
                default = Field(default=overrides[f.name], description=doc)  # type: ignore[index]
            elif f.default_factory is not dataclasses.MISSING:
                default = Field(default_factory=f.default_factory, description=doc)
            else:
                default = Field(default=None if f.default is dataclasses.MISSING else f.default,
                                description=doc)
            fields[f.name] = (hints[f.name], default)
        _MODELS[key] = create_model(cls.__name__, __config__=STRICT, __doc__=cls.__doc__, **fields)
    return _MODELS[key]


def dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def lookup(raw: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return raw


def _hint(value: Any) -> str:
    """A number written in quotes is text: say so."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f" (the quotes make {value!r} text; write the number without them)"
    return ""


def validation_lines(err: ValidationError, raw: Any, where: str = "",
                     unknown: str = "unknown key") -> list[str]:
    """One ``<key> = <value>: <what is allowed>`` line per pydantic error."""
    lines = []
    prefix = f"{where}." if where else ""
    for e in err.errors():
        loc = tuple(e["loc"])
        key = prefix + dotted(loc) if loc else where
        if e["type"] == "missing":
            lines.append(f"{key}: missing; every key must be set (see params.yaml)")
            continue
        value = lookup(raw, loc)
        if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            lines.append(f"{key} = {value!r}: {unknown}")
            continue
        lines.append(f"{key} = {value!r}: {e['msg'][0].lower()}{e['msg'][1:]}{_hint(value)}")
    return lines


def validate_options(cls: type, given: Mapping[str, Any] | None, where: str, what: str,
                     overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every option of ``cls`` (defaults filled), validated; raises ValueError with one line per
    problem, each naming ``where.<key>``. ``what`` names the entry in unknown-key errors."""
    model = option_model(cls, overrides)
    given = dict(given or {})
    allowed = sorted(model.model_fields) or "none"
    try:
        values = model.model_validate(given).model_dump()
    except ValidationError as err:
        raise ValueError("\n".join(validation_lines(
            err, given, where, f"unknown option for {what}; allowed: {allowed}"))) from None
    try:
        return dataclasses.asdict(cls(**values))
    except OptionError as err:
        raise ValueError(f"{where}.{err}") from None


def entries() -> Iterator[tuple[str, str, type, Mapping[str, Any]]]:
    """(section, name, options class, default overrides) of every registered entry's options:
    ``loss_options``, ``schedule_options``, ``arch_options``, ``data.options``, ``data.augment``."""
    for name, loss in LOSSES.items():
        yield "loss_options", name, loss.options, {}
    for name, schedule in SCHEDULES.items():
        yield "schedule_options", name, schedule.options, {}
    for name, encoder in ENCODERS.items():
        yield "arch_options", name, encoder.options, {}
    for name, data in DATASETS.items():
        yield "data.options", name, data.options, {}
        yield "data.augment", name, data.augment_options, data.augment_defaults
