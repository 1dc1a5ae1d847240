"""Where the stages read and write in a workspace: the paths alone (stdlib only, so a stage can
name them before it imports anything heavy; :mod:`pipeline.runtime.context` re-exports them)."""

from pathlib import Path

RESOLVED = Path("params.resolved.yaml")  # written by `stages.resolve`, read by every other stage
TRACKED = Path("params.tracked.yaml")  # what DVC tracks of it (see stages/resolve.py)
DATA = Path("data")
DATASETS = DATA / "datasets"
CELLS = DATA / "cells"
GRID = DATA / "grid.json"  # the cells of the current grid, with their status
STATS = DATA / "stats.parquet"
STATS_DETAIL = DATA / "stats_detail.parquet"
SEARCH = DATA / "search.parquet"
FINITE_K = DATA / "finite_k.parquet"  # CE − R_k per cell, encoder and k
BOUNDS = DATA / "bounds.parquet"
PROBE = DATA / "probe.parquet"  # linear probe and weighted kNN per cell, state and layer
PROBE_FEWSHOT = DATA / "probe_fewshot.parquet"  # few-shot probes per cell, layer, shots, episode
PROBE_FEWSHOT_SUMMARY = DATA / "probe_fewshot_summary.parquet"  # their means over episodes
REPORTS = Path("reports")


def sqlite_path(uri: str) -> str | None:
    """The file of a local SQLite tracking URI as SQLAlchemy opens it, or None (a server, another
    database, an in-memory one). ``sqlite:///mlruns.db`` is ``mlruns.db`` (relative to the
    working folder), ``sqlite:////abs/m.db`` is ``/abs/m.db``; a driver (``sqlite+pysqlite``) and
    a query string (``?timeout=30``: options of the connection, not of the path) are allowed."""
    scheme, sep, rest = uri.partition(":///")
    if not sep or scheme.split("+", 1)[0] != "sqlite":
        return None
    path = rest.split("?", 1)[0]
    return path if path and path != ":memory:" else None
