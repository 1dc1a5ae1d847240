"""Small inference helpers the report shares, in one place (named results, no rendering).

- :func:`normal_quantile`: z such that a two-sided normal interval has coverage ``level``.
"""

from __future__ import annotations

from scipy import stats as sps

from pipeline.stats.uncertainty import check_level


def normal_quantile(level: float) -> float:
    """Φ⁻¹((1 + level)/2): 1.959964 at level 0.95; ValueError unless level is in (0, 1)."""
    return float(sps.norm.ppf((1.0 + check_level(level)) / 2.0))
