"""How a registered entry (a loss, schedule, encoder, dataset or augmentation) declares its options.

Each entry declares its options as a plain frozen dataclass in its own module: one field per
option, with its default and its constraints as ``annotated_types`` metadata
(``Annotated[float, Gt(0)]``), and a one-line ``doc`` in the field's metadata. Rules across fields
go in ``__post_init__`` and raise :class:`OptionError`. The params schema
(:mod:`pipeline.config`) turns each class into a strict pydantic model: that is the one place
options are validated, with errors that name the dotted key, the value and what is allowed, and
the source of the JSON schema (``cbench schema``). A plugin declares its own options the same way.

This module is pure (stdlib only), so the training path can fill defaults without pydantic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REQUIRED: Any = None  # the default of an option without one; __post_init__ rejects it


class OptionError(ValueError):
    """A rule across options failed: ``<key> = <value>: <what is allowed>``."""

    def __init__(self, key: str, value: Any, message: str):
        super().__init__(f"{key} = {value!r}: {message}")
        self.key, self.value, self.message = key, value, message


@dataclass(frozen=True)
class NoOptions:
    """The options of an entry that takes none."""


def option(default: Any, doc: str) -> Any:
    """A dataclass field with a default (a list or dict default is copied per instance) and a
    doc."""
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def defaults(cls: type) -> dict[str, Any]:
    """Every option of ``cls`` with its default (:data:`REQUIRED` where it has none)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = REQUIRED
    return out


def fill(cls: type, given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """``given`` over the defaults of ``cls``, its cross-option rules checked; no type checks.

    For options that :mod:`pipeline.config` has already validated (what a cell carries); an
    unknown key raises ValueError naming ``where.key`` and the allowed keys.
    """
    values = {**defaults(cls), **dict(given or {})}
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(f"{where}.{unknown[0]} = {values[unknown[0]]!r}: unknown option; "
                         f"allowed: {sorted(defaults(cls)) or 'none'}")
    try:
        return dataclasses.asdict(cls(**values))
    except OptionError as err:
        raise ValueError(f"{where}.{err}") from None
