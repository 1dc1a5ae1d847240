"""The params schema: load, validate, expand the grid into cells with stable ids.

``params.yaml`` is the single source of settings (STYLE.md §3). It is loaded once into a frozen,
typed schema; unknown keys, wrong types and cross-field violations fail *before any work* with the
dotted key, the value and what is allowed. A profile (``profiles/<name>.yaml``) holds only the keys
it changes and is laid over ``params.yaml`` key by key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline.losses.registry import LOSSES, resolve_options

ARCHS = ("linear", "mlp")
DATASETS = ("laplace",)


class ConfigError(ValueError):
    """A params problem, worded as ``<dotted key> = <value>: <what is allowed>``."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataConfig(_Section):
    """A dataset and its augmentation channel (SPEC.md §2)."""

    name: Literal["laplace"]
    input_dim: int = Field(ge=1)
    n_train: int = Field(ge=2)
    n_heldout: int = Field(ge=8)
    channel_a: float = Field(ge=0.0, le=1.0)  # A in x' = A·x + √(1−A²)·ε
    noise_std: float = Field(ge=0.0)
    dropout: float = Field(ge=0.0, lt=1.0)
    scale_std: float = Field(ge=0.0)  # per-sample scale exp(N(0, scale_std²))
    seed: int


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class GridConfig(_Section):
    """Axes of the benchmark grid; every combination is one cell."""

    loss: list[str]
    k: list[int]
    tau: list[float]
    n: list[int]
    arch: list[str]
    embed_dim: list[int]
    seed: list[int]

    _listify = field_validator("*", mode="before")(_as_list)


class TrainConfig(_Section):
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=2)
    lr: float = Field(gt=0.0)
    optimizer: Literal["adam", "sgd"]
    negatives: Literal["independent", "in_batch"]
    threads: int = Field(ge=1)  # torch threads per cell; one per core beats two per job


class StatsConfig(_Section):
    block_cols: int = Field(ge=1)  # columns per Dask task
    n_workers: int = Field(ge=1)


class SearchConfig(_Section):
    k_eval: int = Field(ge=1)  # negatives per held-out anchor for the held-out risk


class ComputeConfig(_Section):
    ray_address: str | None
    num_cpus: float = Field(gt=0.0)
    num_gpus: float = Field(ge=0.0)
    max_retries: int = Field(ge=0)


class TrackingConfig(_Section):
    uri: str
    experiment: str


class Params(_Section):
    data: DataConfig
    grid: GridConfig
    loss_options: dict[str, dict[str, Any]]
    arch_options: dict[str, dict[str, Any]]
    train: TrainConfig
    stats: StatsConfig
    search: SearchConfig
    compute: ComputeConfig
    tracking: TrackingConfig


ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "linear": {"bias": False},
    "mlp": {"hidden": [128], "bias": True},
}


@dataclass(frozen=True)
class Cell:
    """One grid cell: everything that determines its training run, and its stable id."""

    cell_id: str
    loss: str
    loss_options: Mapping[str, Any]
    k: int
    tau: float
    n: int
    arch: str
    arch_options: Mapping[str, Any]
    embed_dim: int
    seed: int
    train: TrainConfig
    data: DataConfig

    def config(self) -> dict[str, Any]:
        """The resolved cell config (JSON-ready); its hash is the cell id."""
        return _cell_config(self.loss, dict(self.loss_options), self.k, self.tau, self.n,
                            self.arch, dict(self.arch_options), self.embed_dim, self.seed,
                            self.train, self.data)

    def grid_values(self) -> dict[str, Any]:
        return {"loss": self.loss, "k": self.k, "tau": self.tau, "n": self.n,
                "arch": self.arch, "embed_dim": self.embed_dim, "seed": self.seed}


def _cell_config(loss: str, loss_options: dict[str, Any], k: int, tau: float, n: int, arch: str,
                 arch_options: dict[str, Any], embed_dim: int, seed: int, train: TrainConfig,
                 data: DataConfig) -> dict[str, Any]:
    train_keys = train.model_dump(exclude={"threads"})  # threads change speed, not results
    return {"loss": loss, "loss_options": loss_options, "k": k, "tau": tau, "n": n, "arch": arch,
            "arch_options": arch_options, "embed_dim": embed_dim, "seed": seed,
            "train": train_keys, "data": data.model_dump()}


def cell_id_of(config: Mapping[str, Any]) -> str:
    """12 hex digits of SHA-256 over the canonical JSON of the resolved cell config."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _lookup(raw: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return raw


def _format_validation(err: ValidationError, raw: Mapping[str, Any]) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if p not in ("function-after",))
        value = _lookup(raw, loc)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key; allowed keys are listed in params.yaml and pipeline/config.py"
        if e["type"] == "missing":
            lines.append(f"{_dotted(loc)}: missing; every key must be set (see params.yaml)")
            continue
        lines.append(f"{_dotted(loc)} = {value!r}: {msg}")
    return "\n".join(lines)


def _check_cross_fields(p: Params) -> None:
    """Rules that span sections; each message names the key, the value and the limit."""
    g, t = p.grid, p.train
    for i, tau in enumerate(g.tau):
        if not tau > 0:
            raise ConfigError(f"grid.tau[{i}] = {tau}: temperature must be > 0")
    for axis in ("k", "n", "embed_dim"):
        for i, v in enumerate(getattr(g, axis)):
            if v < 1:
                raise ConfigError(f"grid.{axis}[{i}] = {v}: must be >= 1")
    for i, name in enumerate(g.loss):
        if name not in LOSSES:
            raise ConfigError(f"grid.loss[{i}] = {name!r}: unknown loss; allowed: {sorted(LOSSES)}")
        if LOSSES[name].needs_labels:
            raise ConfigError(f"grid.loss[{i}] = {name!r}: needs labels, and data.name = "
                              f"{p.data.name!r} has none")
    for i, arch in enumerate(g.arch):
        if arch not in ARCHS:
            raise ConfigError(f"grid.arch[{i}] = {arch!r}: unknown architecture; allowed: {list(ARCHS)}")
    for name in p.loss_options:
        if name not in LOSSES:
            raise ConfigError(f"loss_options.{name}: unknown loss; allowed: {sorted(LOSSES)}")
    for name in p.arch_options:
        if name not in ARCH_DEFAULTS:
            raise ConfigError(f"arch_options.{name}: unknown architecture; allowed: {list(ARCHS)}")
    for i, n in enumerate(g.n):
        if n > p.data.n_train:
            raise ConfigError(f"grid.n[{i}] = {n} > data.n_train = {p.data.n_train}: "
                              "the training size cannot exceed the training set")
        if n < t.batch_size:
            raise ConfigError(f"grid.n[{i}] = {n} < train.batch_size = {t.batch_size}: "
                              "need at least one full batch")
    if t.negatives == "in_batch":
        for i, k in enumerate(g.k):
            if k > t.batch_size - 1:
                raise ConfigError(f"grid.k[{i}] = {k} > train.batch_size - 1 = {t.batch_size - 1}: "
                                  "in-batch negatives come from the other samples of the batch")


def _arch_options(p: Params, arch: str) -> dict[str, Any]:
    given = p.arch_options.get(arch, {})
    unknown = sorted(set(given) - set(ARCH_DEFAULTS[arch]))
    if unknown:
        raise ConfigError(f"arch_options.{arch}.{unknown[0]} = {given[unknown[0]]!r}: unknown option; "
                          f"allowed: {sorted(ARCH_DEFAULTS[arch])}")
    return {**ARCH_DEFAULTS[arch], **given}


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Lay ``over`` on ``base`` key by key (nested mappings merge, everything else replaces)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def from_mapping(raw: Mapping[str, Any]) -> Params:
    """Validate a raw params mapping into :class:`Params` (raises :class:`ConfigError`)."""
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation(err, raw)) from None
    _check_cross_fields(params)
    for name in set(params.grid.loss) | set(params.loss_options):
        try:
            resolve_options(name, params.loss_options.get(name), f"loss_options.{name}")
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for arch in params.grid.arch:
        _arch_options(params, arch)
    return params


def load(path: str | Path = "params.yaml", profile: str | Path | None = None) -> Params:
    """Load ``path``, lay ``profile`` over it when given, and validate."""
    raw = read_yaml(path)
    if profile:
        raw = merge(raw, read_yaml(profile))
    return from_mapping(raw)


def expand(params: Params) -> list[Cell]:
    """Every combination of the grid axes, in a stable order, with its cell id."""
    g = params.grid
    cells = []
    for loss, k, tau, n, arch, dim, seed in itertools.product(
        g.loss, g.k, g.tau, g.n, g.arch, g.embed_dim, g.seed
    ):
        loss_opts = resolve_options(loss, params.loss_options.get(loss), f"loss_options.{loss}")
        arch_opts = _arch_options(params, arch)
        config = _cell_config(loss, loss_opts, k, tau, n, arch, arch_opts, dim, seed,
                              params.train, params.data)
        cells.append(Cell(cell_id=cell_id_of(config), loss=loss, loss_options=loss_opts, k=k,
                          tau=tau, n=n, arch=arch, arch_options=arch_opts, embed_dim=dim,
                          seed=seed, train=params.train, data=params.data))
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):
        raise ConfigError("grid: duplicate values on an axis give the same cell twice")
    return cells
