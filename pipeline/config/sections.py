"""The sections of ``params.yaml`` as strict, frozen pydantic models.

Every key is required (``params.yaml`` sets them all; a profile lays its keys over it). Types are
strict (``"4"`` is not an integer, ``true`` is not a number), floats must be finite, unknown keys
fail. The named option sets (``data.options``, ``loss_options.<loss>``, ...) are plain mappings
here: each is validated against its entry's own options model (:mod:`pipeline.config.entries`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from pipeline.grid import GridPoint

OBJECTIVES = ("contrastive", "supervised")
STORAGE_SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")  # pyarrow.fs
STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

PositiveInt = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(gt=0.0, lt=1.0)]


class Section(BaseModel):
    model_config = STRICT


class DataConfig(Section):
    """A dataset, its options and its augmentation (SPEC.md §2); options are filled in by name."""

    name: str = Field(description="the registered dataset (pipeline/datasets/registry.py)")
    n_train: int = Field(ge=2, description="size of the training split")
    n_heldout: int = Field(ge=8, description="size of the held-out split every cell is scored on")
    seed: int = Field(ge=0, lt=2**63, description="seed of the data draw and the held-out views "
                                                  "(NumPy seeds are non-negative)")
    options: dict[str, Any] = Field(description="the dataset's own options (input_dim, path, ...)")
    augment: dict[str, Any] = Field(description="the options of the dataset's views")


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class _Axes(Section):
    if TYPE_CHECKING:  # the fields are made from GridPoint below; each is a list of values
        def __getattr__(self, name: str) -> list[Any]: ...


# The grid axes come from one place, pipeline.grid.GridPoint: one non-empty list per axis.
GridConfig = create_model(  # type: ignore[call-overload]
    "GridConfig", __base__=_Axes,
    __doc__="Axes of the benchmark grid; every combination is one cell.",
    __validators__={"_listify": field_validator("*", mode="before")(_as_list)},
    **{name: (list[hint], Field(min_length=1))  # type: ignore[valid-type]
       for name, hint in get_type_hints(GridPoint).items()})


class TrainConfig(Section):
    epochs: int = Field(ge=0,
                        description="0: export the initial (or frozen pretrained) encoder only")
    lr: float = Field(gt=0.0)
    optimizer: Literal["adam", "sgd"]
    negatives: Literal["independent", "in_batch"] = Field(
        description="independent: fresh draws from the data (the theory's setting); in_batch: "
                    "the other samples of the batch")
    threads: PositiveInt = Field(description="torch threads per cell")
    device: Literal["auto", "cpu", "cuda"] = Field(description="auto: CUDA when present")
    precision: Literal["float32", "bfloat16", "auto"] = Field(
        description="bfloat16: autocast on CPU and CUDA; auto: the faster on the cell's device")
    memory_format: Literal["contiguous", "channels_last", "auto"] = Field(
        description="memory format of image batches and convolution weights")
    deterministic: bool = Field(
        description="deterministic kernels only (torch.use_deterministic_algorithms); slower")
    on_code_change: Literal["retrain", "keep", "fail"] = Field(
        description="a done cell trained by other code: retrain it, keep it (marked stale) or fail")


class StatsConfig(Section):
    block_cols: PositiveInt = Field(description="embedding columns per Dask task")
    n_workers: PositiveInt = Field(description="local Dask workers")
    projections: int = Field(ge=0, description="random orthonormal directions tested besides the "
                                               "coordinates (0: off; at most embed_dim)")
    bootstrap: int = Field(ge=0, description="row resamples for the CV interval (0: no intervals)")
    epochs: list[int] = Field(description="epochs whose held-out embeddings are analysed too "
                                          "(0: the untrained control)")
    null_draws: int = Field(ge=0, description="Gaussian samples shaped like each cell's embeddings")


class SearchConfig(Section):
    k_eval: PositiveInt = Field(description="negatives per held-out anchor for the held-out risk")
    knn_k: PositiveInt = Field(description="neighbours in the leave-one-out majority vote among "
                                           "held-out points (knn_loo_majority)")
    k_sweep: list[PositiveInt] = Field(min_length=1, description="k's for R_k and CE − R_k")
    anchors: int = Field(ge=2, description="held-out anchors; the rest of the held-out set is the "
                                           "pool of unseen points")
    positives: PositiveInt = Field(description="fresh positive views per anchor for the CE")
    encoders: list[Literal["trained", "initial"]] = Field(
        min_length=1, description="initial: the same encoder untrained (a fixed φ)")
    block: PositiveInt = Field(description="tile size of the blocked CE_m")
    pool: int = Field(ge=2, description="points ζ ~ π for log E e^{s/τ} and the nested negatives "
                                        "of the CE − R_k sweep")
    fit_k_min: PositiveInt = Field(description="|CE − R_k| ~ k^slope is fitted over k >= this")
    fit_k_max: PositiveInt | None = Field(description="... and k <= this (null: no upper end)")


class BoundsConfig(Section):
    delta: Fraction = Field(description="Theorem 1 holds with probability >= 1 - delta")
    tuples: int = Field(ge=2, description="tuples for the training risk and the fresh-tuple risk")


class ProbeConfig(Section):
    """Frozen-feature evaluation (SPEC.md §5): linear probe and weighted kNN."""

    c_grid: list[Annotated[float, Field(gt=0.0)]] = Field(
        min_length=1, description="inverse L2 strengths C swept by the linear probe")
    val_fraction: Fraction = Field(description="of the training split, held out to choose C")
    knn_k: list[PositiveInt] = Field(min_length=1, description="neighbours of the weighted kNN")
    knn_temperature: float = Field(gt=0.0, description="T in the vote weights exp(s/T)")
    # label efficiency: the two keys have defaults (off), unlike every other key, so
    # that a params file or profile written before them reads as before
    shots: list[PositiveInt] = Field(
        default_factory=list, json_schema_extra={"uniqueItems": True},
        description="labelled examples per class of the few-shot probes (each value once; []: "
                    "off)")
    episodes: PositiveInt = Field(
        default=5, description="few-shot draws per value of shots (the interval is over them)")


# report.compare: any grid axis but the seed (the seed is what is averaged within a block)
CompareAxis = Literal[tuple(n for n in get_type_hints(GridPoint) if n != "seed")]  # type: ignore[misc,valid-type]


class ReportConfig(Section):
    group_by: list[str] = Field(description="leaderboard rows: one per combination of these axes")
    metrics: list[str] = Field(min_length=1, description="metrics of the full tables")
    baseline: str = Field(description="the loss every other variant is compared with")
    level: Fraction = Field(description="confidence level of every interval")
    alpha: Fraction = Field(description="significance level of the paired tests")
    columns: list[str] = Field(min_length=1, max_length=8,
                               description="headline metrics of the publishable tables")
    primary: str = Field(description="the metric the tables are ranked and sorted by")
    top: int = Field(ge=1, description="settings in the Markdown and LaTeX tables (all in the "
                                       "HTML page and the CSVs)")
    compare: CompareAxis = Field(  # type: ignore[valid-type]
        description="the axis whose values are ranked across the blocks of the other axes (seeds "
                    "averaged) on report.primary: reports/ranks.csv, pairs.csv, the CD diagram")
    bootstrap: int = Field(ge=1, description="stratified-bootstrap resamples (seeds within each "
                                             "block) of the intervals in ranks.csv and pairs.csv")
    rope: float = Field(ge=0.0, allow_inf_nan=False, description=(
        "the smallest difference of report.primary that matters, on its scale (a fraction for a "
        "% metric: 0.01 = 1 point): a pair whose interval of the difference lies inside ±rope is "
        "practically equivalent (Benavoli et al. 2017), and pairs.csv asks no more seeds of it; "
        "0: no such region"))


class GeometryConfig(Section):
    """Free-embedding optimisation of the SupCon family (Vock et al. 2026): the simplex check."""

    losses: list[Literal["supcon", "soft_supcon"]] = Field(min_length=1)
    class_counts: list[Annotated[list[PositiveInt], Field(min_length=2)]] = Field(
        min_length=1, description="samples per class, one run per entry (C = its length)")
    d: int = Field(ge=2)
    tau: float = Field(gt=0.0)
    steps: PositiveInt
    seed: int = Field(ge=0, lt=2**63)
    tolerance: float = Field(gt=0.0, description="largest |cosine + 1/(C−1)| counted a simplex")


class ComputeConfig(Section):
    ray_address: Annotated[str, Field(min_length=1)] | None = Field(
        description="null: a local Ray on 127.0.0.1; or a cluster address")
    storage: Annotated[str, Field(min_length=1)] | None = Field(
        description="the cell store: null = the project's default; or a pyarrow.fs URI")
    num_cpus: float = Field(gt=0.0, description="per cell")
    num_gpus: float = Field(ge=0.0, description="per cell; fractions pack cells onto one GPU")
    max_retries: int = Field(ge=0, description="retries of a cell its environment failed (out "
                                               "of memory, a lost worker, a timeout...)")
    retry_backoff_s: float = Field(ge=0.0, le=600.0, description="the wait before the first "
                                   "retry, doubled before each next one")
    cell_timeout_s: float | None = Field(gt=0.0, description="null: none; else an attempt that "
                                         "runs longer ends and is retried")


class TrackingConfig(Section):
    uri: str = Field(min_length=1, description="MLflow tracking URI (sqlite:///mlruns.db: the "
                                               "project's database)")
    experiment: str = Field(min_length=1)


class Params(Section):
    plugins: list[Annotated[str, Field(min_length=1)]] = Field(
        description="modules or .py files that register extra losses")
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
