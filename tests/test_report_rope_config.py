"""report.rope: the region of practical equivalence (pipeline.stats.comparisons.power) as a
params key."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, from_mapping


@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), "small"])
def test_a_bad_rope_names_the_key_the_value_and_the_range(tiny_params, bad):
    tiny_params["report"]["rope"] = bad
    with pytest.raises(ConfigError) as info:
        from_mapping(tiny_params)
    text = str(info.value)
    assert text.startswith("report.rope = "), text
    if bad == -0.01:
        assert text == "report.rope = -0.01: input should be greater than or equal to 0"


def test_rope_is_required_and_zero_allowed(tiny_params):
    tiny_params["report"]["rope"] = 0
    assert from_mapping(tiny_params).report.rope == 0.0
    del tiny_params["report"]["rope"]
    with pytest.raises(ConfigError, match="report.rope"):
        from_mapping(tiny_params)
