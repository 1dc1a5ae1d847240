"""Read ``params.yaml`` (and a profile laid over it), validate it, expand the grid.

Order: read the YAML (errors name the file, line and column); lay the profile over it; import
the plugins it names (once, before validation, so their losses are registered); validate every
section, every entry's options and every rule across keys, and for ``resolve`` the files the
params name (:mod:`pipeline.config.files`), reporting all problems at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pipeline.config import files
from pipeline.config.entries import validate_options, validation_lines
from pipeline.config.rules import check
from pipeline.config.sections import Params
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from pipeline.grid import GRID_AXES, Cell, DataSpec, GridSpec, concrete_device
from pipeline.grid import expand as expand_grid
from pipeline.losses.registry import LOSSES
from pipeline.losses.schedules import SCHEDULES
from pipeline.plugins import load_plugins


class ConfigError(ValueError):
    """A params problem, worded as ``<dotted key> = <value>: <what is allowed>`` (a line each)."""


# Option sets whose allowed keys depend on a name (the dataset's): a profile replaces them whole.
REPLACED_WHOLE = frozenset({"data.options", "data.augment"})


def merge(base: Mapping[str, Any], over: Mapping[str, Any], _path: str = "") -> dict[str, Any]:
    """Lay ``over`` on ``base`` key by key: nested mappings merge, everything else replaces.

    The mappings in :data:`REPLACED_WHOLE` are replaced, not merged: a profile that switches
    the dataset must not inherit the other dataset's options.
    """
    out = dict(base)
    for key, value in over.items():
        path = f"{_path}.{key}" if _path else str(key)
        if (isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
                and path not in REPLACED_WHOLE):
            out[key] = merge(out[key], value, path)
        else:
            out[key] = value
    return out


class _Loader(yaml.SafeLoader):
    """YAML 1.1's safe loader, but ``1e-3`` is a number (as in YAML 1.2), not the text '1e-3'."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML file; a syntax error names the file, line and column."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    try:
        raw = yaml.load(path.read_text(), Loader=_Loader) or {}  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: YAML error: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def _options(p: Params) -> tuple[dict[str, Any], list[str]]:
    """Every named option set filled in and validated by its entry's model; problems as lines."""
    problems: list[str] = []

    def check(cls: type, given: Any, where: str, what: str,
              overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        try:
            return validate_options(cls, given, where, what, overrides)
        except ValueError as err:
            problems.extend(str(err).splitlines())
            return {}

    g, d = p.grid, p.data
    out: dict[str, Any] = {}
    if d.name in DATASETS:
        spec = DATASETS[d.name]
        out["data"] = p.data.model_copy(update={
            "options": check(spec.options, d.options, "data.options", f"dataset {d.name!r}"),
            "augment": check(spec.augment_options, d.augment, "data.augment",
                             f"the views of {d.name!r}", spec.augment_defaults)})
    registries: dict[str, tuple[dict[str, Any], Callable[[Any], type], list[str], str]] = {
        "loss_options": (LOSSES, lambda e: e.options, g.loss, "loss"),
        "schedule_options": (SCHEDULES, lambda e: e.options, g.tau_schedule, "schedule"),
        "arch_options": (ENCODERS, lambda e: e.options, g.arch, "architecture")}
    for section, (registry, options_of, used, noun) in registries.items():
        given = getattr(p, section)
        out[section] = {name: check(options_of(registry[name]), given.get(name),
                                    f"{section}.{name}", f"{noun} {name!r}")
                        for name in sorted(set(used) | set(given)) if name in registry}
    return out, problems


def from_mapping(raw: Mapping[str, Any], *, check_files: bool = False) -> Params:
    """Validate a raw params mapping into :class:`Params` with every option filled in; with
    ``check_files``, the files and folders it names must be readable too (``resolve``'s check
    before any work: :mod:`pipeline.config.files`).

    Plugins are not imported here (see :func:`load`): a loss they register must be registered
    before this is called.
    """
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError("\n".join(validation_lines(
            err, raw, unknown="unknown key; allowed keys are listed in params.yaml and "
                              "pipeline/config/sections.py"))) from None
    resolved, problems = _options(params)
    problems += check(params)
    full = params.model_copy(update=resolved)
    if check_files:
        problems += files.problems(full)
    if problems:
        raise ConfigError("\n".join(problems))
    return full


def load(path: str | Path = "params.yaml", profile: str | Path | None = None, *,
         check_files: bool = False) -> Params:
    """Load ``path``, lay ``profile`` over it when given, import its plugins, and validate (with
    ``check_files``, the files it names too: :func:`from_mapping`)."""
    raw = read_yaml(path)
    if profile:
        raw = merge(raw, read_yaml(profile))
    plugins = raw.get("plugins", [])
    if isinstance(plugins, list) and all(isinstance(x, str) for x in plugins):
        try:
            load_plugins(plugins)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return from_mapping(raw, check_files=check_files)


def grid_spec(params: Params) -> GridSpec:
    """The plain description of the grid that :func:`pipeline.grid.expand` turns into cells."""
    d = params.data

    def schedule_options(schedule: str, tau: float) -> dict[str, Any]:
        spec = SCHEDULES[schedule]
        return validate_options(spec.options, {**params.schedule_options[schedule],
                                                spec.target: tau},
                                f"schedule_options.{schedule}", f"schedule {schedule!r}")

    def unread(objective: str, loss: str) -> tuple[str, ...]:
        return LOSSES[loss].unread if objective == "contrastive" else ()

    train = params.train.model_dump()
    # the id names what runs: ``auto`` is the device the cell's Ray task is given
    train["device"] = concrete_device(train["device"], params.compute.num_gpus > 0)
    return GridSpec(axes={a: tuple(getattr(params.grid, a)) for a in GRID_AXES},
                    loss_options=params.loss_options, arch_options=params.arch_options,
                    schedule_options=schedule_options, train=train, unread=unread,
                    data=DataSpec(d.name, d.n_train, d.n_heldout, d.seed, dict(d.options),
                                  dict(d.augment)))


def expand(params: Params) -> list[Cell]:
    """Every combination of the grid axes, in a stable order, with its cell id (no duplicates)."""
    return expand_grid(grid_spec(params))
