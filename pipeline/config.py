"""The params schema: load, validate, expand the grid into cells with stable ids.

``params.yaml`` is the single source of settings (STYLE.md §3). It is loaded once into a frozen,
typed schema; unknown keys, wrong types and cross-field violations fail *before any work* with the
dotted key, the value and what is allowed. A profile (``profiles/<name>.yaml``) holds only the keys
it changes and is laid over ``params.yaml`` key by key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from pipeline.datasets.registry import DATASETS, resolve_augment_options, resolve_dataset_options
from pipeline.encoders.registry import ENCODERS, resolve_encoder_options
from pipeline.grid import GRID_AXES, Cell, DataSpec, GridPoint, GridSpec
from pipeline.grid import expand as expand_grid
from pipeline.losses.registry import LOSSES, resolve_options
from pipeline.losses.schedules import SCHEDULES, resolve_schedule_options
from pipeline.plugins import load_plugins

OBJECTIVES = ("contrastive", "supervised")
# The grid's τ is the schedule's target: this option of each schedule is set to it.
SCHEDULE_TAU_KEY = {"constant": "tau", "log_anneal": "tau_min", "linear": "tau_end",
                    "cosine": "tau_end", "learnable": "tau_init"}

class ConfigError(ValueError):
    """A params problem, worded as ``<dotted key> = <value>: <what is allowed>``."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataConfig(_Section):
    """A dataset, its options and its augmentation (SPEC.md §2); options are filled in by name."""

    name: str
    n_train: int = Field(ge=2)
    n_heldout: int = Field(ge=8)
    seed: int
    options: dict[str, Any]  # the dataset's own options (input_dim, path, ...)
    augment: dict[str, Any]  # the view function's options (channel A, jitter, crops, ...)


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class _Axes(_Section):
    if TYPE_CHECKING:  # the fields are made from GridPoint below; each is a list of values
        def __getattr__(self, name: str) -> list[Any]: ...


# The grid axes come from one place, pipeline.grid.GridPoint: one non-empty list per axis.
GridConfig = create_model(  # type: ignore[call-overload]
    "GridConfig", __base__=_Axes, __doc__="Axes of the benchmark grid; every combination is one cell.",
    __validators__={"_listify": field_validator("*", mode="before")(_as_list)},
    **{name: (list[hint], Field(min_length=1))  # type: ignore[valid-type]
       for name, hint in get_type_hints(GridPoint).items()})


class TrainConfig(_Section):
    epochs: int = Field(ge=0)  # 0: export the initial (or frozen pretrained) encoder only
    lr: float = Field(gt=0.0)
    optimizer: Literal["adam", "sgd"]
    negatives: Literal["independent", "in_batch"]
    threads: int = Field(ge=1)  # torch threads per cell; one per core beats two per job
    device: Literal["auto", "cpu", "cuda"]  # auto: CUDA when present
    precision: Literal["float32", "bfloat16", "auto"]  # bfloat16: autocast on CPU and CUDA
    memory_format: Literal["contiguous", "channels_last", "auto"]  # of image batches and convs
    on_code_change: Literal["retrain", "keep", "fail"]  # a done cell trained by other code


class StatsConfig(_Section):
    block_cols: int = Field(ge=1)  # columns per Dask task
    n_workers: int = Field(ge=1)
    projections: int = Field(ge=0)  # random orthonormal directions tested besides the coordinates
    bootstrap: int = Field(ge=0)  # row resamples for the CV interval; 0 = no intervals at all
    epochs: list[int]  # epochs whose embeddings are kept and analysed too (0: untrained control)
    null_draws: int = Field(ge=0)  # Gaussian samples shaped like each cell's embeddings (0: off)


class SearchConfig(_Section):
    k_eval: int = Field(ge=1)  # negatives per held-out anchor for the held-out risk
    k_sweep: list[int]  # fresh-negative k's for R_k and CE − R_k (the cell's own k is added)
    anchors: int = Field(ge=2)  # held-out anchors for CE and R_k; the other held-out points are the pool
    positives: int = Field(ge=1)  # fresh positive views per anchor for the Monte Carlo CE
    encoders: list[Literal["trained", "initial"]]  # initial: the same encoder untrained (fixed φ)
    block: int = Field(ge=1)  # tile size of the blocked CE_m
    pool: int = Field(ge=2)  # points ζ ~ π for log E e^{s/τ} and the negatives of the CE − R_k sweep
    fit_k_min: int = Field(ge=1)  # the log-log slope of |CE − R_k| is fitted over k >= fit_k_min
    fit_k_max: int | None = Field(ge=1)  # ... and k <= fit_k_max (null: no upper end)

    @field_validator("fit_k_max")
    @classmethod
    def _fit_range(cls, value: int | None, info: Any) -> int | None:
        low = info.data.get("fit_k_min")
        if value is not None and low is not None and value < low:
            raise ValueError(f"must be >= search.fit_k_min = {low}")
        return value


class BoundsConfig(_Section):
    delta: float = Field(gt=0.0, lt=1.0)  # Theorem 1 holds with probability >= 1 - delta
    tuples: int = Field(ge=2)  # tuples for the training risk R̂_n and the fresh-tuple risk R


class GeometryConfig(_Section):
    """Free-embedding optimisation of the SupCon family (Vock et al. 2026): the simplex check."""

    losses: list[Literal["supcon", "soft_supcon"]]
    class_counts: list[list[int]]  # samples per class, one run per entry (C = its length)
    d: int = Field(ge=2)
    tau: float = Field(gt=0.0)
    steps: int = Field(ge=1)
    seed: int
    tolerance: float = Field(gt=0.0)  # largest |cosine + 1/(C−1)| that still counts as a simplex


class ReportConfig(_Section):
    group_by: list[str]  # leaderboard rows: one per combination of these (seeds are averaged)
    metrics: list[str]  # columns, each as mean ± CI over seeds with its rank where meaningful
    baseline: str  # the loss every other variant is compared with (paired across seeds)
    level: float = Field(gt=0.0, lt=1.0)  # confidence level of the intervals
    alpha: float = Field(gt=0.0, lt=1.0)  # significance level of the paired tests
    columns: list[str]  # the headline metrics of the publishable tables (at most 8)
    primary: str  # the metric the tables are ranked and sorted by


class ProbeConfig(_Section):
    """Frozen-feature evaluation (SPEC.md §5): linear probe and weighted kNN."""

    c_grid: list[float]  # inverse L2 strengths swept by the linear probe (scikit-learn's C)
    val_fraction: float = Field(gt=0.0, lt=1.0)  # of the training split, to choose C
    knn_k: list[int]  # neighbours of the weighted kNN
    knn_temperature: float = Field(gt=0.0)  # T in the vote weights exp(s/T)


STORAGE_SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")  # pyarrow.fs


class ComputeConfig(_Section):
    ray_address: str | None
    storage: str | None  # where cells are written: null = data/cells here; or a pyarrow.fs URI
    num_cpus: float = Field(gt=0.0)
    num_gpus: float = Field(ge=0.0)
    max_retries: int = Field(ge=0)


class TrackingConfig(_Section):
    uri: str
    experiment: str


class Params(_Section):
    plugins: list[str]  # modules or .py files that register extra losses (pipeline/plugins.py)
    data: DataConfig
    grid: GridConfig
    loss_options: dict[str, dict[str, Any]]
    schedule_options: dict[str, dict[str, Any]]
    arch_options: dict[str, dict[str, Any]]
    train: TrainConfig
    stats: StatsConfig
    search: SearchConfig
    bounds: BoundsConfig
    probe: ProbeConfig
    report: ReportConfig
    geometry: GeometryConfig
    compute: ComputeConfig
    tracking: TrackingConfig


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
        loc = tuple(e["loc"])
        if e["type"] == "missing":
            lines.append(f"{_dotted(loc)}: missing; every key must be set (see params.yaml)")
            continue
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key; allowed keys are listed in params.yaml and pipeline/config.py"
        lines.append(f"{_dotted(loc)} = {_lookup(raw, loc)!r}: {msg}")
    return "\n".join(lines)


def _check_names(p: Params) -> None:
    """Every name on a grid axis or an options key must be registered."""
    g = p.grid
    axes = {"objective": ("objective", OBJECTIVES), "loss": ("loss", LOSSES),
            "tau_schedule": ("schedule", SCHEDULES), "arch": ("architecture", ENCODERS)}
    for axis, (noun, allowed) in axes.items():
        for i, name in enumerate(getattr(g, axis)):
            if name not in allowed:
                raise ConfigError(f"grid.{axis}[{i}] = {name!r}: unknown {noun}; "
                                  f"allowed: {sorted(allowed)}")
    for section, allowed in (("loss_options", LOSSES), ("schedule_options", SCHEDULES),
                             ("arch_options", ENCODERS)):
        for name in getattr(p, section):
            if name not in allowed:
                raise ConfigError(f"{section}.{name}: unknown name; allowed: {sorted(allowed)}")
    if p.data.name not in DATASETS:
        raise ConfigError(f"data.name = {p.data.name!r}: unknown dataset; allowed: {sorted(DATASETS)}")


def _check_values(p: Params) -> None:
    """Rules across sections; each message names the key, the value and the limit."""
    g, t = p.grid, p.train
    for i, tau in enumerate(g.tau):
        if not tau > 0:
            raise ConfigError(f"grid.tau[{i}] = {tau}: temperature must be > 0")
    for axis, least in (("k", 1), ("n", 1), ("embed_dim", 1), ("batch_size", 2)):
        for i, v in enumerate(getattr(g, axis)):
            if v < least:
                raise ConfigError(f"grid.{axis}[{i}] = {v}: must be >= {least}")
    labels = DATASETS[p.data.name].labels
    for i, name in enumerate(g.loss):
        if LOSSES[name].needs_labels and labels == "none" and "contrastive" in g.objective:
            raise ConfigError(f"grid.loss[{i}] = {name!r}: needs labels, and data.name = "
                              f"{p.data.name!r} has none")
    if "supervised" in g.objective and labels != "class":
        raise ConfigError(f"grid.objective = {g.objective}: 'supervised' needs class labels, and "
                          f"data.name = {p.data.name!r} has none")
    kind = DATASETS[p.data.name].kind
    for i, arch in enumerate(g.arch):
        if kind not in ENCODERS[arch].kind:
            raise ConfigError(f"grid.arch[{i}] = {arch!r}: takes {list(ENCODERS[arch].kind)} "
                              f"inputs, and data.name = {p.data.name!r} is {kind}")
    for i, n in enumerate(g.n):
        if n > p.data.n_train:
            raise ConfigError(f"grid.n[{i}] = {n} > data.n_train = {p.data.n_train}: "
                              "the training size cannot exceed the training set")
        if n < max(g.batch_size):
            raise ConfigError(f"grid.n[{i}] = {n} < max(grid.batch_size) = {max(g.batch_size)}: "
                              "need at least one full batch")
    axes = set(GridConfig.model_fields)
    for i, axis in enumerate(p.report.group_by):
        if axis not in axes or axis == "seed":
            raise ConfigError(f"report.group_by[{i}] = {axis!r}: must be a grid axis other than "
                              f"seed; allowed: {sorted(axes - {'seed'})}")
    store = p.compute.storage
    if store is not None and store.split("://", 1)[0] not in STORAGE_SCHEMES:
        raise ConfigError(f"compute.storage = {store!r}: must be null (data/cells on this "
                          f"machine) or a URI with a scheme in {list(STORAGE_SCHEMES)}, e.g. "
                          "s3://bucket/prefix or file:///shared/cells")
    for i, e in enumerate(p.stats.epochs):
        if not 0 <= e <= t.epochs:
            raise ConfigError(f"stats.epochs[{i}] = {e}: must be in [0, train.epochs = {t.epochs}]")
    if t.negatives == "in_batch" and any(LOSSES[name].needs_negatives for name in g.loss):
        for i, k in enumerate(g.k):
            if k > min(g.batch_size) - 1:
                raise ConfigError(f"grid.k[{i}] = {k} > min(grid.batch_size) - 1 = "
                                  f"{min(g.batch_size) - 1}: in-batch negatives come from the "
                                  "other samples of the batch")


def _resolve_options(p: Params) -> Params:
    """Fill every option of every named dataset, loss, schedule and encoder (errors name the key)."""
    g = p.grid
    try:
        data = p.data.model_copy(update={
            "options": resolve_dataset_options(p.data.name, p.data.options, "data.options"),
            "augment": resolve_augment_options(p.data.name, p.data.augment, "data.augment")})
        losses = {n: resolve_options(n, p.loss_options.get(n), f"loss_options.{n}")
                  for n in sorted(set(g.loss) | set(p.loss_options))}
        schedules = {n: resolve_schedule_options(n, p.schedule_options.get(n), f"schedule_options.{n}")
                     for n in sorted(set(g.tau_schedule) | set(p.schedule_options))}
        archs = {a: resolve_encoder_options(a, p.arch_options.get(a), f"arch_options.{a}")
                 for a in sorted(set(g.arch) | set(p.arch_options))}
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return p.model_copy(update={"data": data, "loss_options": losses, "schedule_options": schedules,
                                "arch_options": archs})


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


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def from_mapping(raw: Mapping[str, Any]) -> Params:
    """Validate a raw params mapping into :class:`Params` with every option filled in."""
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation(err, raw)) from None
    try:
        load_plugins(params.plugins)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    _check_names(params)
    _check_values(params)
    return _resolve_options(params)


def load(path: str | Path = "params.yaml", profile: str | Path | None = None) -> Params:
    """Load ``path``, lay ``profile`` over it when given, and validate."""
    raw = read_yaml(path)
    if profile:
        raw = merge(raw, read_yaml(profile))
    return from_mapping(raw)


def _schedule_options(params: Params) -> Callable[[str, float], dict[str, Any]]:
    """The schedule's options with the grid's τ as its target, checked together."""
    def options(schedule: str, tau: float) -> dict[str, Any]:
        key = SCHEDULE_TAU_KEY[schedule]
        try:
            return resolve_schedule_options(
                schedule, {**params.schedule_options[schedule], key: tau},
                f"schedule_options.{schedule} (with {key} = grid.tau {tau})")
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return options


def grid_spec(params: Params) -> GridSpec:
    """The plain description of the grid that :func:`pipeline.grid.expand` turns into cells."""
    d = params.data
    return GridSpec(axes={a: tuple(getattr(params.grid, a)) for a in GRID_AXES},
                    loss_options=params.loss_options, arch_options=params.arch_options,
                    schedule_options=_schedule_options(params), train=params.train.model_dump(),
                    data=DataSpec(d.name, d.n_train, d.n_heldout, d.seed, dict(d.options),
                                  dict(d.augment)))


def expand(params: Params) -> list[Cell]:
    """Every combination of the grid axes, in a stable order, with its cell id (no duplicates)."""
    return expand_grid(grid_spec(params))
