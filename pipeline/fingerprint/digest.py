"""The digest: a cell's registry entries as units, and the fingerprint over everything its roots
and entries reach."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from pipeline.fingerprint.reach import closure, object_keys, unit_named
from pipeline.fingerprint.sources import FINGERPRINTS, add_plugin
from pipeline.fingerprint.units import HASH_CHARS, REGISTRY_MODULES, digest_of

# What every cell runs: the training loop and what it calls; the code that writes its files.
TRAINING_ROOTS = ("pipeline.train:train_cell", "pipeline.runtime.cells.one_cell:run_cell")


# --- registry entries ----------------------------------------------------------------------------

def _describe(value: Any) -> Any:
    """An entry's field as JSON: code as its unit keys, data as itself."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _describe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_describe(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if callable(value):
        return {"code": sorted(object_keys(value))}
    text = repr(value)
    return type(value).__qualname__ if " at 0x" in text else text


def _entry(table: str, name: str, spec: Any) -> tuple[str, str, list[str]]:
    """(key, hash, the units it names) of one registry entry: its fields as data, its callables
    and classes as code."""
    values = ({f.name: getattr(spec, f.name) for f in fields(spec)} if is_dataclass(spec)
              else dict(vars(spec)) if hasattr(spec, "__dict__") else {"value": spec})
    code = [type(spec), *(v for v in values.values() if callable(v))]
    for obj in code:  # a plugin's entry: its module and its package are followed
        add_plugin(getattr(obj, "__module__", None) or "")
    roots = [k for obj in code for k in object_keys(obj)]
    blob = json.dumps({k: _describe(v) for k, v in values.items()}, sort_keys=True)
    return f"{table}[{name!r}]", digest_of([blob])[:HASH_CHARS], roots


# --- fingerprints --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fingerprint:
    """The code that makes a cell's files: ``functions`` (unit key -> hash of its code),
    ``modules`` (module -> hash over its units here) and ``digest`` (12 hex) over them."""

    digest: str
    modules: Mapping[str, str]
    functions: Mapping[str, str]

    def changed(self, other: Mapping[str, Any]) -> list[str]:
        """The modules whose units here differ from a recorded :meth:`as_record` (the units
        themselves: :meth:`changed_units`)."""
        theirs = other.get("modules", {}) if isinstance(other, Mapping) else {}
        mine = dict(self.modules)
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    def changed_units(self, other: Mapping[str, Any]) -> list[str]:
        """The unit keys whose code differs from a recorded :meth:`as_record`."""
        theirs = other.get("functions", {}) if isinstance(other, Mapping) else {}
        mine = dict(self.functions)
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    def as_record(self) -> dict[str, Any]:
        """What ``cell.json`` records (``code_fingerprint``): one dict per fingerprint, shared by
        its cells (a 10 000-cell grid holds a few of them, not one each): do not change it."""
        return self._record

    @functools.cached_property
    def _record(self) -> dict[str, Any]:
        return {"digest": self.digest, "modules": dict(self.modules),
                "functions": dict(self.functions)}


def fingerprint(roots: Iterable[str],
                entries: Mapping[str, tuple[str, list[str]]] | None = None) -> Fingerprint:
    """The fingerprint of the units ``roots`` and what they reach, with registry ``entries``
    (key -> (hash of its data, the units it names), which are followed too)."""
    entries = entries or {}
    units = closure([*roots, *(k for _, names in entries.values() for k in names)])
    units.update({key: digest for key, (digest, _) in entries.items()})
    by_module: dict[str, dict[str, str]] = {}
    for key, digest in units.items():
        by_module.setdefault(key.split(":", 1)[0], {})[key] = digest
    modules = {m: digest_of(f"{k}={v}" for k, v in sorted(u.items()))[:HASH_CHARS]
               for m, u in sorted(by_module.items())}
    digest = digest_of(f"{k}={v}" for k, v in sorted(units.items()))[:12]
    return Fingerprint(digest, modules, dict(sorted(units.items())))


def function_hash(fn: Callable[..., Any]) -> str:
    """The hash of the unit that defines ``fn`` (its code; '' when it is not followed code)."""
    keys = object_keys(fn)
    unit = unit_named(keys[0]) if keys else None
    return unit.hash if unit is not None else ""


def cell_entries(cell: Any) -> list[tuple[str, str, Any]]:
    """(registry table key, entry name, spec) of every registry entry ``cell`` uses."""
    from pipeline.datasets.augment import AUGMENTATIONS
    from pipeline.datasets.registry import DATASETS
    from pipeline.encoders.registry import ENCODERS
    from pipeline.losses.registry import LOSSES
    from pipeline.losses.schedules import SCHEDULES

    out: list[tuple[str, str, Any]] = []
    if cell.objective == "contrastive":
        for table, registry, name in (("LOSSES", LOSSES, cell.loss),
                                      ("SCHEDULES", SCHEDULES, cell.tau_schedule)):
            if name in registry:
                out.append((f"{REGISTRY_MODULES[table]}:{table}", name, registry[name]))
    if cell.arch in ENCODERS:
        out.append((f"{REGISTRY_MODULES['ENCODERS']}:ENCODERS", cell.arch, ENCODERS[cell.arch]))
    data = DATASETS.get(cell.data.name)
    if data is not None:
        out.append((f"{REGISTRY_MODULES['DATASETS']}:DATASETS", cell.data.name, data))
        if data.augmentation in AUGMENTATIONS:
            out.append((f"{REGISTRY_MODULES['AUGMENTATIONS']}:AUGMENTATIONS", data.augmentation,
                        AUGMENTATIONS[data.augmentation]))
    return out


def code_fingerprint(cell: Any) -> Fingerprint:
    """The fingerprint of the code that trains ``cell`` (a :class:`pipeline.grid.Cell`) and
    writes its files: :data:`TRAINING_ROOTS` and the cell's registry entries, followed (see the
    package docstring). Computed once per distinct set of entries."""
    used = cell_entries(cell)
    cache_key = tuple((table, name, id(spec)) for table, name, spec in used)
    if cache_key not in FINGERPRINTS:
        entries = {}
        for table, name, spec in used:
            key, digest, roots = _entry(table, name, spec)
            entries[key] = (digest, roots)
        FINGERPRINTS[cache_key] = (fingerprint(TRAINING_ROOTS, entries), [s for *_, s in used])
    return FINGERPRINTS[cache_key][0]
