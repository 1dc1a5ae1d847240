"""Option schemas for the dataset, augmentation and encoder registries.

A schema maps each option name to a check ``value -> None | str``: ``None`` when the value is
allowed, else the text that follows the colon in ``ValueError("<where>.<key> = <value>: <text>")``.
Plain functions in a plain dict, so every registry entry states its options in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], "str | None"]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def positive_int(v: Any) -> str | None:
    return None if _is_int(v) and v > 0 else "must be an integer > 0"


def non_negative(v: Any) -> str | None:
    return None if _is_num(v) and v >= 0 else "must be a number >= 0"


def probability(v: Any) -> str | None:
    return None if _is_num(v) and 0 <= v <= 1 else "must be a probability in [0, 1]"


def open_unit(v: Any) -> str | None:
    return None if _is_num(v) and 0 < v < 1 else "must be in the open interval (0, 1)"


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def text(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "must be a non-empty string"


def required_path(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "a path to a local file is required"


def mapping(v: Any) -> str | None:
    ok = isinstance(v, Mapping) and all(isinstance(k, str) for k in v)
    return None if ok else "must be a mapping with string keys"


def one_of(*allowed: Any) -> Check:
    def check(v: Any) -> str | None:
        return None if v in allowed else f"allowed: {list(allowed)}"
    return check


def int_list(v: Any) -> str | None:
    ok = isinstance(v, (list, tuple)) and all(_is_int(h) and h > 0 for h in v)
    return None if ok else "must be a list of integers > 0"


def interval(lo: float, hi: float) -> Check:
    """A pair ``[a, b]`` with ``lo <= a <= b <= hi`` (YAML lists and tuples both accepted)."""
    def check(v: Any) -> str | None:
        ok = (isinstance(v, (list, tuple)) and len(v) == 2 and all(map(_is_num, v))
              and lo <= v[0] <= v[1] <= hi)
        return None if ok else f"must be a pair [a, b] with {lo} <= a <= b <= {hi}"
    return check


def validate(schema: Mapping[str, Check], options: Mapping[str, Any], where: str) -> None:
    """Check every given option: unknown keys and bad values raise ``ValueError`` naming ``where.key``."""
    for key, value in options.items():
        if key not in schema:
            raise ValueError(f"{where}.{key} = {value!r}: unknown option; allowed: {sorted(schema)}")
        problem = schema[key](value)
        if problem is not None:
            raise ValueError(f"{where}.{key} = {value!r}: {problem}")


def resolve(schema: Mapping[str, Check], defaults: Mapping[str, Any],
            given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """Defaults overlaid with ``given``, validated; every option present in the result."""
    options = {**defaults, **(given or {})}
    validate(schema, options, where)
    return options
