"""claim_verdict (pipeline.report.papers.side_by_side) reads a grid's groups by a strict
majority: one held group of three is not enough, two are; a tie is unresolved (issue 48, item 5)."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.report.papers.side_by_side import claim_verdict


def table(values: list[str | None], column: str = "verdict") -> pd.DataFrame:
    reasons = ["" if v in ("held", "contradicted") else "interval covers zero" for v in values]
    return pd.DataFrame({column: values, column.replace("verdict", "reason"): reasons})


@pytest.mark.parametrize("column", ["verdict", "training_verdict"])
@pytest.mark.parametrize(("values", "value"), [
    (["held", "unresolved", "unresolved"], "unresolved"),  # any one held is not a majority
    (["held", "held", "unresolved"], "held"),
    (["contradicted", "unresolved", "unresolved"], "unresolved"),
    (["contradicted", "contradicted", "held"], "contradicted"),
    (["held", "held", "unresolved", "unresolved"], "unresolved"),  # half is not more than half
    (["held", "contradicted"], "unresolved"),
    ([None, "held", "held"], "held"),  # a group without a value counts, unresolved
    ([None, None, "held"], "unresolved"),
])
def test_held_needs_strictly_more_than_half_of_the_groups(values, value, column):
    assert claim_verdict(table(values, column), column).value == value
