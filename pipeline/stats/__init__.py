"""Distribution statistics of embeddings (SPEC §2): normality tests per coordinate, thin-shell
CV, geometry, uncertainty. Pure functions of numpy arrays; imports only numpy, scipy, torch."""

from pipeline.stats.anderson import ad_critical_5pct, ad_pass, anderson_darling
from pipeline.stats.checks import check_embeddings
from pipeline.stats.column_tests import ColumnTests, column_tests, concat_column_tests
from pipeline.stats.dagostino import dagostino_pearson
from pipeline.stats.geometry import alignment, effective_rank, negative_cosines, uniformity
from pipeline.stats.projections import random_projections
from pipeline.stats.summary import CellSummary, summarize
from pipeline.stats.thin_shell import thin_shell_cv
from pipeline.stats.uncertainty import (
    ConfidenceInterval,
    bootstrap_ci,
    hierarchical_bootstrap,
    seed_ci,
)

__all__ = [
    "CellSummary",
    "ColumnTests",
    "ConfidenceInterval",
    "ad_critical_5pct",
    "ad_pass",
    "alignment",
    "anderson_darling",
    "bootstrap_ci",
    "check_embeddings",
    "column_tests",
    "concat_column_tests",
    "dagostino_pearson",
    "effective_rank",
    "hierarchical_bootstrap",
    "negative_cosines",
    "random_projections",
    "seed_ci",
    "summarize",
    "thin_shell_cv",
    "uniformity",
]
