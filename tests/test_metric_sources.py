"""Each stage emits exactly the metric columns that the registry says it produces
(:attr:`pipeline.metrics.Metric.source`, under the names :func:`pipeline.metrics.stage_columns`
gives for its table), and the report's per-cell table carries each under its registered name.

One tiny contrastive cell goes through the real producers: ``run_cell`` (train: the record,
``cell.json``), ``stats_cell`` and ``stats_tables`` (stats), ``search_one`` and
``search_tables`` (search), ``bounds_one`` and ``bounds_table`` (bounds), ``probe_cell`` (probe:
the rows of ``data/probe.parquet``). It is a labelled Gaussian mixture with a linear encoder and
the untrained encoder searched too, so that every metric has its case: the kNN accuracies need
labels, Theorem 1 a linear or MLP encoder, the k-sweep a contrastive cell.

Which columns of a stage's output are metric columns; the first rule that applies decides:

1. A column that the stage's registered metrics name (:func:`stage_columns`) is a metric, a real
   or an integer (``peak_rss_bytes`` is one in ``cell.json``), never text; ``weighted_knn_<k>``
   is one metric per k of ``probe.knn_k``. A registered metric of another stage, or under another
   name than its stage table's, is a mistake.
2. A derived column (``null_cv``, ``initial_ce``: the families of :func:`pipeline.metrics.lookup`)
   belongs to its base metric, which must be this stage's.
3. Not a real number, so not a metric: text, flags and structures (ids, statuses, reasons,
   sources, verdicts such as ``vacuous``, the record's ``config``). An integer is a count, a size
   or an index (``epoch``, ``d``, ``features``), not a metric.
4. A setting: a column named for a grid axis or for a key of the stage's params section (``tau``,
   ``delta``).
5. A named part (:data:`PARTS`): a number the stage writes on purpose that is not a reported
   metric, with why; with a family prefix (``initial_gap_c1``), the same part of another encoder.
6. About a metric or a part: ``<name>_<suffix>`` beside a column ``<name>`` that rules 1, 2 or 5
   accept (an interval ``cv_lo``, ``risk_k_se``; the halves ``recall_at_1_report``; the fit's
   ``slope_leading``), and the intervals' level (``ci_level``).

A real-valued column that no rule accepts is a metric-like column the registry does not know.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel

from pipeline.config import (
    BoundsConfig,
    ProbeConfig,
    SearchConfig,
    StatsConfig,
    TrainConfig,
    expand,
    from_mapping,
    merge,
    read_yaml,
)
from pipeline.datasets import load_dataset
from pipeline.grid import GRID_AXES
from pipeline.metrics import (
    CONTROLS,
    KNN_PREFIX,
    LAYERS,
    METRICS,
    REPRESENTATIONS,
    SOURCES,
    Source,
    is_metric,
    lookup,
    stage_columns,
)
from pipeline.probe.frozen import ProbeSettings
from pipeline.report.grid.leaderboard import join
from pipeline.report.grid.probe import probe_columns
from pipeline.runtime.backends.probe_ops import probe_cell
from pipeline.runtime.cells.analyses import (
    INTERVAL_LEVEL,
    bounds_one,
    search_one,
    stats_cell,
)
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.cells.tables import bounds_table, search_tables, stats_tables
from pipeline.runtime.store import layout
from tests.conftest import ROOT, TINY

# The numbers a stage writes on purpose that are not reported metrics (rule 5), and why.
PARTS: dict[str, frozenset[str]] = {
    # when the cell ran and its wall-clock time with set-up and files (the registered cost of
    # training is train_seconds; the report's cost table sums wall_seconds as it is)
    "train": frozenset({"wall_seconds", "started_at", "finished_at"}),
    # the D'Agostino-Pearson K² averaged over coordinates (its p-value, dp_p_mean, is the
    # metric), and the cosine similarity of negative pairs: diagnostics of stats.parquet only
    "stats": frozenset({"dp_stat_mean", "neg_cos_mean", "neg_cos_std"}),
    # the report half's number of anchors (a float in the table); the coefficients of the 1/k
    # expansion of CE − R_k fitted over the k-sweep
    "search": frozenset({"recall_report_anchors", "gap_c1", "gap_c2", "gap_c3"}),
    # Theorem 1's terms and constants (BoundTerms): the report draws them, ranks none
    "bounds": frozenset({"empirical_risk", "complexity", "sample_variability", "finite_k_ratio",
                         "finite_k_window", "excess", "measured_risk", "range_fraction", "A",
                         "R", "B_tau", "C_phi", "e_r2"}),
    "probe": frozenset(),
}
# rule 4: what a stage's params section names (the grid axes are settings of every stage)
SETTINGS: dict[str, type[BaseModel]] = {
    "train": TrainConfig, "stats": StatsConfig, "search": SearchConfig, "bounds": BoundsConfig,
    "probe": ProbeConfig}
FAMILY_PREFIXES = (*LAYERS, *REPRESENTATIONS, *CONTROLS)
NUMBER, INTEGER, OTHER = "number", "integer", "other"


@dataclass(frozen=True)
class Produced:
    """What the producers gave for one cell: each stage's output as a table, and what the
    report needs besides."""

    tables: dict[str, pd.DataFrame]
    knn_k: tuple[int, ...]
    grid: pd.DataFrame
    record: dict[str, Any]
    final_epoch: int


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Produced:
    raw = merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))
    raw["data"].update(name="gaussian_mixture", options={"input_dim": 16, "components": 3})
    raw["grid"].update(k=[4])
    raw["train"].update(device="cpu")
    raw["search"].update(encoders=["trained", "initial"])
    params = from_mapping(raw)
    cell = expand(params)[0]
    d = params.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, raw["data"]["options"])
    folder = tmp_path_factory.mktemp("metric-sources") / "cell"
    outcome = run_cell(cell, dataset, folder, {})
    assert outcome.status == "ok", outcome.reason
    epoch = cell.train.epochs
    stats, _ = stats_tables(stats_cell(cell.cell_id, epoch, folder / layout.EMBEDDINGS,
                                       params.stats, params.report.level))
    search, _ = search_tables([cell], [search_one(cell, dataset, str(folder), params.search)])
    bounds = bounds_table([cell], [bounds_one(cell, dataset, str(folder), params.bounds)])
    p = params.probe
    settings = ProbeSettings(p.c_grid, p.val_fraction, p.knn_k, p.knn_temperature,
                             params.report.level, (), p.episodes)
    probe = pd.DataFrame(probe_cell(cell, dataset, str(folder), settings)[0])
    grid = pd.DataFrame([{"cell_id": cell.cell_id, "status": "ok", "reason": "",
                          **cell.grid_values()}])
    return Produced({"train": pd.DataFrame([outcome.record]), "stats": stats, "search": search,
                     "bounds": bounds, "probe": probe}, tuple(p.knn_k), grid, outcome.record,
                    epoch)


def _kind(value: Any) -> str:
    if value is None or isinstance(value, float | np.floating):
        return NUMBER  # None: a number not measured (cuda_peak_bytes on a CPU)
    if isinstance(value, bool | np.bool_):
        return OTHER
    return INTEGER if isinstance(value, int | np.integer) else OTHER


def kinds(table: pd.DataFrame) -> dict[str, str]:
    """Each column's kind: number (real, or None/NaN only), integer, or other (text, flags,
    structures)."""
    out = {}
    for col in table.columns:
        series = table[col]
        if pd.api.types.is_bool_dtype(series):
            out[col] = OTHER
        elif pd.api.types.is_integer_dtype(series):
            out[col] = INTEGER
        elif pd.api.types.is_float_dtype(series):
            out[col] = NUMBER
        else:
            seen = {_kind(v) for v in series if not (isinstance(v, float) and np.isnan(v))}
            out[col] = next((k for k in (NUMBER, INTEGER, OTHER) if k in seen), NUMBER)
    return out


def _strip_families(col: str) -> str:
    while (prefix := next((p for p in FAMILY_PREFIXES if col.startswith(p)), None)) is not None:
        col = col.removeprefix(prefix)
    return col


@dataclass(frozen=True)
class Split:
    """A stage's output split by the module's rules: the registered metrics it emits (registry
    names), and what is wrong."""

    emitted: frozenset[str]
    unregistered: tuple[str, ...]  # metric-like columns no rule accepts
    misplaced: tuple[str, ...]  # metrics of another stage or name, or not numbers


def split(stage: Source, columns: Mapping[str, str]) -> Split:
    """``columns``: ``{name: kind}`` of one stage's output (:func:`kinds`)."""
    names = stage_columns(stage)  # rule 1
    settings = {*GRID_AXES, *SETTINGS[stage].model_fields}
    emitted: set[str] = set()
    accepted: set[str] = set()
    misplaced: list[str] = []
    rest: list[str] = []
    for col, kind in columns.items():
        if col in names or (col.startswith(KNN_PREFIX) and is_metric(col)):
            source = lookup(col).source if col not in names else stage
            if source != stage:
                misplaced.append(f"{col} (registered with source={source!r})")
            elif kind == OTHER:
                misplaced.append(f"{col} (not a number)")
            emitted.add(names.get(col, col))
            accepted.add(col)
        elif col in METRICS:
            m = METRICS[col]
            where = f", its column there {m.column!r}" if m.column else ""
            misplaced.append(f"{col} (registered with source={m.source!r}{where})")
        elif is_metric(col):  # rule 2
            if lookup(col).source != stage:
                misplaced.append(f"{col} (derived from a metric of source="
                                 f"{lookup(col).source!r})")
            accepted.add(col)
        elif kind == NUMBER and col not in settings:  # rules 3 and 4
            rest.append(col)
    parts = {c for c in rest if _strip_families(c) in PARTS[stage]}  # rule 5
    accepted |= parts
    unregistered = [c for c in rest if c not in parts and c != INTERVAL_LEVEL
                    and not any(c.startswith(a + "_") for a in accepted)]  # rule 6
    return Split(frozenset(emitted), tuple(unregistered), tuple(misplaced))


def expected(stage: Source, knn_k: tuple[int, ...]) -> set[str]:
    """The metrics registered with ``source = stage`` (``weighted_knn_<k>`` per k)."""
    names = set(stage_columns(stage).values())
    return names | ({f"{KNN_PREFIX}{k}" for k in knn_k} if stage == "probe" else set())


def check(stage: Source, table: pd.DataFrame, knn_k: tuple[int, ...]) -> None:
    got = split(stage, kinds(table))
    missing = sorted(expected(stage, knn_k) - got.emitted)
    assert not (missing or got.unregistered or got.misplaced), (
        f"{stage}: registered with source={stage!r} but not emitted: {missing or 'none'}; "
        f"emitted but not registered: {list(got.unregistered) or 'none'}; misplaced: "
        f"{list(got.misplaced) or 'none'}. Register a metric once in pipeline/metrics.py with "
        f"source={stage!r} (and column=... where its table names it otherwise); a number that is "
        "not a metric goes in PARTS here, with why.")


STAGES: list[Source] = [s for s in SOURCES if s != "report"]


@pytest.mark.slow  # the module's producers: one cell trained, then each stage (~10 s)
@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_emits_exactly_its_registered_metrics(produced, stage):
    table = produced.tables[stage]
    statuses = table.filter(like="status").stack().astype(str)
    assert len(table) and not statuses.str.startswith("failed").any(), table
    check(stage, table, produced.knn_k)


def test_every_source_has_a_producer_checked_here():
    """A metric of a source without a producer here (``report``: a column the report computes
    from other columns; none today) needs its producer's check added to this module."""
    unchecked = {m.name: m.source for m in METRICS.values() if m.source not in STAGES}
    assert not unchecked, f"metrics whose source has no producer check here: {unchecked}"


@pytest.mark.parametrize(("stage", "drop", "missing", "add"), [
    ("stats", "eff_rank", "eff_rank", "neg_cos_median"),
    ("search", "knn_loo_majority", "knn_loo_majority", "recall_at_20"),
    ("bounds", "measured_gap", "gen_gap", "bound_per_k"),
    ("probe", "linear_probe_c", "linear_probe_c", "balanced_accuracy"),
    ("train", "samples_per_second", "samples_per_second", "loss_first_epoch"),
])
@pytest.mark.slow
def test_a_dropped_or_an_unregistered_column_fails_naming_it(produced, stage, drop, missing,
                                                            add):
    table = produced.tables[stage]
    with pytest.raises(AssertionError, match=rf"not emitted: \['{missing}'\]; emitted but not "
                                             r"registered: none; misplaced: none"):
        check(stage, table.drop(columns=drop), produced.knn_k)
    with pytest.raises(AssertionError, match=rf"not emitted: none; emitted but not registered: "
                                             rf"\['{add}'\]"):
        check(stage, table.assign(**{add: 0.5}), produced.knn_k)


def test_a_metric_under_the_registry_name_in_its_stage_table_fails():
    """bounds.parquet names Theorem 1's right-hand side ``total``: a table with ``bound``
    instead has lost ``bound`` (under its stage name) and misplaced ``bound``."""
    table = pd.DataFrame({"cell_id": ["a"], "bound_status": ["ok"], "bound": [1.0],
                          "measured_gap": [0.1], "tightness": [10.0]})
    with pytest.raises(AssertionError, match=r"not emitted: \['bound'\]; .* misplaced: "
                                             r"\[\"bound \(registered with source='bounds', "
                                             r"its column there 'total'\)\"\]"):
        check("bounds", table, ())


@pytest.mark.slow
def test_the_per_cell_table_carries_each_metric_under_its_registered_name(produced):
    """The report's join (and the probe's columns) rename what a stage's table names otherwise
    (bounds' ``total`` is ``bound``) and carry every registered metric into ``cells.csv``."""
    t = produced.tables
    cells = join(produced.grid, {produced.grid.cell_id[0]: produced.record}, t["stats"],
                 t["search"], produced.final_epoch, t["bounds"])
    cells = probe_columns(cells, t["probe"])
    want = set().union(*(expected(s, produced.knn_k) for s in STAGES))
    assert not want - set(cells.columns), sorted(want - set(cells.columns))
    renamed = {c for s in STAGES for c, name in stage_columns(s).items() if c != name}
    assert renamed == {"total", "measured_gap"} and not renamed & set(cells.columns)
    bounds = t["bounds"].iloc[0]
    assert cells.bound[0] == bounds.total and cells.gen_gap[0] == bounds.measured_gap


def test_the_registry_maps_stage_columns_to_metric_names():
    assert stage_columns("bounds") == {"total": "bound", "measured_gap": "gen_gap",
                                       "tightness": "tightness"}
    assert stage_columns("report") == {}
    assert all(lookup(f"{p}cv").source == "stats" for p in ("norm_", "null_", "control_"))
    assert lookup("weighted_knn_7").source == "probe" and lookup("initial_ce").source == "search"

