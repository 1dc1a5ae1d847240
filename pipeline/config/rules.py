"""The rules across keys that types and ranges cannot say, each worded ``<key> = <value>: <why>``.

Every constraint that is knowable before training lives here or in an entry's options model, so
that ``resolve`` rejects it before any work. Each rule is a generator of messages: all problems
are reported at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pipeline.config.sections import OBJECTIVES, STORAGE_SCHEMES, Params
from pipeline.config.store_path import SHARED_ENV, STORE_ENV, node_local
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from pipeline.grid import GRID_AXES
from pipeline.losses.registry import LOSSES
from pipeline.losses.schedules import SCHEDULES
from pipeline.metrics import METRICS, is_metric, lookup

Rule = Callable[[Params], Iterator[str]]
# pipeline.search.crn.MIN_TAU (equal by a test): the search stage refuses τ at or below it.
# Not imported, so that the stages that validate params do not depend on the search code.
MIN_TAU = 2.0 / 709.0
TRACKING_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")


def _duplicates(key: str, values: Sequence[Any]) -> Iterator[str]:
    seen: set[Any] = set()
    for i, v in enumerate(values):
        if v in seen:
            yield f"{key}[{i}] = {v!r}: duplicate value; list each value once"
        seen.add(v)


def names(p: Params) -> Iterator[str]:
    """Every name on a grid axis, an options key and the dataset must be registered."""
    registered = {"objective": ("objective", OBJECTIVES), "loss": ("loss", LOSSES),
                  "tau_schedule": ("schedule", SCHEDULES), "arch": ("architecture", ENCODERS)}
    for axis, (noun, allowed) in registered.items():
        for i, name in enumerate(getattr(p.grid, axis)):
            if name not in allowed:
                yield f"grid.{axis}[{i}] = {name!r}: unknown {noun}; allowed: {sorted(allowed)}"
    for section, allowed in (("loss_options", LOSSES), ("schedule_options", SCHEDULES),
                             ("arch_options", ENCODERS)):
        for name in getattr(p, section):
            if name not in allowed:
                yield f"{section}.{name}: unknown name; allowed: {sorted(allowed)}"
    if p.data.name not in DATASETS:
        yield f"data.name = {p.data.name!r}: unknown dataset; allowed: {sorted(DATASETS)}"


def axes(p: Params) -> Iterator[str]:
    """Ranges of the grid's values; each value once."""
    g = p.grid
    for axis in GRID_AXES:
        yield from _duplicates(f"grid.{axis}", getattr(g, axis))
    for i, tau in enumerate(g.tau):
        if not tau > 0:
            yield f"grid.tau[{i}] = {tau}: temperature must be > 0"
    for axis, least in (("k", 1), ("n", 1), ("embed_dim", 1), ("batch_size", 2), ("seed", 0)):
        for i, v in enumerate(getattr(g, axis)):
            if v < least:
                yield f"grid.{axis}[{i}] = {v}: must be >= {least}"
    for i, seed in enumerate(g.seed):
        if seed >= 2**63:
            yield f"grid.seed[{i}] = {seed}: must be < 2**63 (a 64-bit seed)"
    if "contrastive" in g.objective:
        for i, tau in enumerate(g.tau):
            if 0 < tau <= MIN_TAU:
                yield (f"grid.tau[{i}] = {tau}: the search stage needs τ > {MIN_TAU:.5f} (its "
                       "estimator's largest weight e^(2/τ) must be a finite float64)")


def data_fit(p: Params) -> Iterator[str]:
    """Labels, input kinds and sizes: what the dataset offers against what the grid asks."""
    g, d = p.grid, p.data
    if d.name not in DATASETS:
        return
    spec = DATASETS[d.name]
    contrastive = "contrastive" in g.objective
    for i, name in enumerate(g.loss):
        if name in LOSSES and LOSSES[name].needs_labels and spec.labels == "none" and contrastive:
            yield (f"grid.loss[{i}] = {name!r}: needs labels, and data.name = {d.name!r} has "
                   "none")
    if "supervised" in g.objective and spec.labels != "class":
        yield (f"grid.objective = {g.objective}: 'supervised' needs class labels, and data.name "
               f"= {d.name!r} has none")
    for i, arch in enumerate(g.arch):
        if arch in ENCODERS and spec.kind not in ENCODERS[arch].kind:
            yield (f"grid.arch[{i}] = {arch!r}: takes {list(ENCODERS[arch].kind)} inputs, and "
                   f"data.name = {d.name!r} is {spec.kind}")
    for i, n in enumerate(g.n):
        if n > d.n_train:
            yield (f"grid.n[{i}] = {n} > data.n_train = {d.n_train}: the training size cannot "
                   "exceed the training set")
        if n < max(g.batch_size):
            yield (f"grid.n[{i}] = {n} < max(grid.batch_size) = {max(g.batch_size)}: need at "
                   "least one full batch")


def negatives(p: Params) -> Iterator[str]:
    """k against what each loss needs and what the batch holds."""
    g, t = p.grid, p.train
    if "contrastive" not in g.objective:
        return
    using = [name for name in g.loss if name in LOSSES and LOSSES[name].needs_negatives]
    for name in using:
        least = LOSSES[name].min_k
        for i, k in enumerate(g.k):
            if k < least:
                yield (f"grid.k[{i}] = {k}: loss {name!r} needs k >= {least} negatives per "
                       "anchor")
    if t.negatives == "in_batch" and using:
        for i, k in enumerate(g.k):
            if k > min(g.batch_size) - 1:
                yield (f"grid.k[{i}] = {k} > min(grid.batch_size) - 1 = {min(g.batch_size) - 1}: "
                       "in-batch negatives come from the other samples of the batch")


def schedules(p: Params) -> Iterator[str]:
    """Each schedule with each grid τ as its target (tau_min < tau_max, ...)."""
    from pipeline.config.entries import validate_options

    for schedule in p.grid.tau_schedule:
        if schedule not in SCHEDULES or "contrastive" not in p.grid.objective:
            continue
        spec = SCHEDULES[schedule]
        for tau in (t for t in p.grid.tau if t > 0):  # τ <= 0 is reported by axes()
            try:
                validate_options(spec.options, {**p.schedule_options.get(schedule, {}),
                                                spec.target: tau},
                                 f"schedule_options.{schedule} (with {spec.target} = grid.tau "
                                 f"{tau})", f"schedule {schedule!r}")
            except ValueError as err:
                yield str(err)


def stages(p: Params) -> Iterator[str]:
    """Settings of the analysis stages against the data and the grid."""
    s, t, d, g = p.stats, p.train, p.data, p.grid
    for i, e in enumerate(s.epochs):
        if not 0 <= e <= t.epochs:
            yield f"stats.epochs[{i}] = {e}: must be in [0, train.epochs = {t.epochs}]"
    yield from _duplicates("stats.epochs", s.epochs)
    if s.projections > min(g.embed_dim):
        yield (f"stats.projections = {s.projections} > min(grid.embed_dim) = {min(g.embed_dim)}: "
               "orthonormal directions need projections <= d")
    if 2 * p.search.anchors > d.n_heldout:
        yield (f"search.anchors = {p.search.anchors} > data.n_heldout / 2 = {d.n_heldout // 2}: "
               "the other held-out points are the pool of unseen points, at least as many")
    yield from _duplicates("search.k_sweep", p.search.k_sweep)
    lo, hi = p.search.fit_k_min, p.search.fit_k_max
    if hi is not None and hi < lo:
        yield f"search.fit_k_max = {hi}: must be >= search.fit_k_min = {lo}"
    elif "contrastive" in g.objective:
        for k in g.k:  # each cell's sweep is search.k_sweep with its own k added
            fitted = sorted(x for x in {*p.search.k_sweep, k} if lo <= x <= (hi or x))
            if len(fitted) < 2:
                yield (f"search.fit_k_min = {lo}, search.fit_k_max = {hi}: the slope of "
                       f"|CE − R_k| needs at least 2 k's of the sweep in that range, and the "
                       f"cells with grid.k = {k} have {fitted} (sweep: "
                       f"{sorted({*p.search.k_sweep, k})})")
                break
    yield from _duplicates("search.encoders", p.search.encoders)
    yield from _duplicates("probe.c_grid", p.probe.c_grid)
    yield from _duplicates("probe.knn_k", p.probe.knn_k)
    for i, k in enumerate(p.probe.knn_k):
        if k > d.n_train:
            yield (f"probe.knn_k[{i}] = {k} > data.n_train = {d.n_train}: the kNN's bank is the "
                   "training split")
    yield from _duplicates("probe.shots", p.probe.shots)
    for i, shots in enumerate(p.probe.shots):
        if 2 * shots > d.n_train:  # the probes need two classes, each with shots rows
            yield (f"probe.shots[{i}] = {shots}: 2 classes × {shots} shots > data.n_train = "
                   f"{d.n_train}; allowed: shots <= data.n_train / (number of classes), at most "
                   f"{d.n_train // 2}")
    for i, counts in enumerate(p.geometry.class_counts):
        if p.geometry.d < len(counts) - 1:
            yield (f"geometry.class_counts[{i}] = {counts}: {len(counts)} classes need "
                   f"geometry.d >= {len(counts) - 1} for a simplex (geometry.d = {p.geometry.d})")


def report(p: Params) -> Iterator[str]:
    """Rows, the baseline and the metrics of the report."""
    r, g = p.report, p.grid
    allowed = [a for a in GRID_AXES if a != "seed"]
    for i, axis in enumerate(r.group_by):
        if axis not in allowed:
            yield (f"report.group_by[{i}] = {axis!r}: must be a grid axis other than seed; "
                   f"allowed: {sorted(allowed)}")
    yield from _duplicates("report.group_by", r.group_by)
    if r.baseline not in LOSSES:
        yield f"report.baseline = {r.baseline!r}: unknown loss; allowed: {sorted(LOSSES)}"
    elif "contrastive" in g.objective and len(g.loss) > 1 and r.baseline not in g.loss:
        yield (f"report.baseline = {r.baseline!r}: not a loss of the grid, so no variant can be "
               f"compared with it; allowed: {list(g.loss)}")
    for key in ("metrics", "columns"):
        yield from _duplicates(f"report.{key}", getattr(r, key))
        for i, name in enumerate(getattr(r, key)):
            if not is_metric(name):
                yield (f"report.{key}[{i}] = {name!r}: not a metric of the registry "
                       f"(pipeline/metrics.py); allowed: {', '.join(METRICS)} and their "
                       "control_/null_/supervised_/delta_/norm_/proj_ columns")
    if not is_metric(r.primary):
        yield (f"report.primary = {r.primary!r}: not a metric of the registry; allowed: "
               f"{', '.join(n for n, m in METRICS.items() if m.ranked)}")
    elif not lookup(r.primary).ranked:
        yield (f"report.primary = {r.primary!r}: a statistic with no better direction cannot rank "
               f"the rows; allowed: {', '.join(n for n, m in METRICS.items() if m.ranked)}")


def local_cores() -> int:
    """The CPUs this process may use: what a local Ray instance sizes itself to."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


DASK_CLUSTER_ENV = "CBENCH_DASK_CLUSTER"  # when the local Dask stages start their cluster
DASK_CLUSTER_MODES = ("auto", "always")  # auto: when the first batch says it pays; always: at once


def _mode_problem(env: Mapping[str, str], name: str, modes: tuple[str, ...]) -> str | None:
    """What is wrong with the setting ``$name`` (unset means its first mode), or None."""
    mode = env.get(name, modes[0])
    return None if mode in modes else f"${name} = {mode!r}: allowed: {', '.join(modes)}"


def dask_cluster_problem(env: Mapping[str, str] = os.environ) -> str | None:
    """What is wrong with ``$CBENCH_DASK_CLUSTER`` (unset means ``auto``), or None; checked by
    ``resolve`` before any work and by :func:`pipeline.runtime.backends.scheduler.scheduler`."""
    return _mode_problem(env, DASK_CLUSTER_ENV, DASK_CLUSTER_MODES)


TRAIN_WORKERS_ENV = "CBENCH_TRAIN_WORKERS"  # where the train stage runs a local CPU grid's cells
TRAIN_WORKERS_MODES = ("auto", "ray")  # auto: processes forked from the stage where they serve


def train_workers_problem(env: Mapping[str, str] = os.environ) -> str | None:
    """What is wrong with ``$CBENCH_TRAIN_WORKERS`` (unset means ``auto``), or None; checked by
    ``resolve`` before any work and by :func:`pipeline.runtime.backends.cell_workers.forked`."""
    return _mode_problem(env, TRAIN_WORKERS_ENV, TRAIN_WORKERS_MODES)


def compute(p: Params) -> Iterator[str]:
    """Where cells go, what each task asks of a node, and where runs are tracked."""
    c = p.compute
    if c.storage is not None and c.storage.split("://", 1)[0] not in STORAGE_SCHEMES:
        yield (f"compute.storage = {c.storage!r}: must be null (the project's cell store) or a "
               f"URI with a scheme in {list(STORAGE_SCHEMES)}, e.g. s3://bucket/prefix or "
               "file:///shared/cells")
    if c.ray_address is None and not os.environ.get("RAY_ADDRESS"):
        cores = local_cores()
        if c.num_cpus > cores:
            yield (f"compute.num_cpus = {c.num_cpus:g}: a cell's task would never start on the "
                   f"local Ray instance, which has {cores} CPUs; allowed: at most {cores}, or "
                   "point compute.ray_address at a cluster with larger nodes")
    if c.num_gpus > 1 and not float(c.num_gpus).is_integer():
        yield (f"compute.num_gpus = {c.num_gpus}: above 1 it must be a whole number (a fraction "
               "packs several cells onto one GPU; no task spans part of a second GPU)")
    for problem in (dask_cluster_problem(), train_workers_problem()):
        if problem is not None:
            yield problem
    uri = p.tracking.uri
    scheme = uri.split(":", 1)[0] if ":" in uri else ""
    if any(ch.isspace() for ch in uri):
        yield f"tracking.uri = {uri!r}: must not contain spaces"
    elif scheme and scheme.split("+")[0] not in TRACKING_SCHEMES:
        yield (f"tracking.uri = {uri!r}: unknown scheme {scheme!r}; allowed: "
               f"{list(TRACKING_SCHEMES)} or a local folder")
    elif scheme == "sqlite" and not uri.startswith("sqlite:///"):
        yield (f"tracking.uri = {uri!r}: a SQLite store is written sqlite:///<path> "
               "(e.g. sqlite:///mlruns.db)")


def cluster_store(p: Params) -> Iterator[str]:
    """A cluster run (``compute.ray_address``, else ``$RAY_ADDRESS``, set) needs a store every
    node reaches: its workers write the cells there and the later stages read them on other
    nodes. A node-local store (see :mod:`pipeline.config.store_path`) is refused."""
    address = p.compute.ray_address or os.environ.get("RAY_ADDRESS")
    if not address:
        return
    why = node_local(p.compute.storage)
    if why:
        via = (f"compute.ray_address = {address!r}" if p.compute.ray_address
               else f"$RAY_ADDRESS = {address!r}")
        yield (f"compute.storage = {p.compute.storage!r}: a cluster run ({via}) needs a cell "
               f"store on storage every node mounts at the same path, and {why}, one node's own "
               "disk; set compute.storage to an object store URI (s3://bucket/prefix) or "
               f"${STORE_ENV} (or compute.storage: file://…) to the shared volume (cluster/"
               f"README.md), or set {SHARED_ENV}=1 if that path is shared")


RULES: tuple[Rule, ...] = (names, axes, data_fit, negatives, schedules, stages, report, compute,
                           cluster_store)


def check(p: Params) -> list[str]:
    """Every rule's messages, in order."""
    return [message for rule in RULES for message in rule(p)]
