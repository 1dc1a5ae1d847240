"""Dask tasks that fail for one cell only: a raised error becomes a :class:`Failed` value.

A task body is a plain function that raises when a cell's data is bad (:class:`CellDataError`
for what our checks find; anything else a library raises on bad data counts the same). The
:func:`task` wrapper turns the error into ``Failed(reason)``, and a task given a ``Failed``
input returns it without running, so one cell's failure flows to its rows while the rest of
the graph goes on (a raised error would abort the whole ``compute``). Inputs named ``optional``
arrive as ``None`` instead of stopping the task.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class CellDataError(ValueError):
    """A cell's data cannot be analysed (unreadable, non-finite, too few rows); the message
    says why and becomes the cell's recorded reason."""


@dataclass(frozen=True)
class Failed:
    """What a task returns instead of its value when the cell's data failed; ``reason`` names
    the error."""

    reason: str


def failure(value: Any) -> Failed | None:
    """The ``Failed`` in ``value`` (itself, or an item of a list or tuple), else None."""
    if isinstance(value, Failed):
        return value
    if isinstance(value, list | tuple):
        return next((v for v in value if isinstance(v, Failed)), None)
    return None


def reason(err: Exception) -> str:
    """The recorded reason of ``err``: our checks' message as it is, else ``Type: message``."""
    return str(err) if isinstance(err, CellDataError) else f"{type(err).__name__}: {err}"


def task(*optional: str) -> Callable[[Callable[P, T]], Callable[..., T | Failed]]:
    """Decorator: the function as a Dask task of one cell (see the module docstring).

    ``optional``: parameter names whose ``Failed`` input (or a list holding one) is passed as
    ``None``; any other ``Failed`` input is returned at once. The wrapped function takes the
    same arguments, each of which may also be a ``Failed`` (so its type says ``...``).
    """

    def wrap(fn: Callable[P, T]) -> Callable[..., T | Failed]:
        signature = inspect.signature(fn)
        unknown = set(optional) - set(signature.parameters)
        if unknown:
            raise TypeError(f"task(optional={sorted(unknown)}): not parameters of {fn.__name__}")

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> T | Failed:
            bound = signature.bind(*args, **kwargs)
            for name, value in bound.arguments.items():
                failed = failure(value)
                if failed is not None and name not in optional:
                    return failed
                if failed is not None:
                    bound.arguments[name] = None
            try:
                return fn(*bound.args, **bound.kwargs)
            except Exception as err:  # noqa: BLE001 — one cell's failure, recorded as its reason
                return Failed(reason(err))

        return run

    return wrap
