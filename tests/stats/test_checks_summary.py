from dataclasses import asdict

import numpy as np
import pytest

from pipeline.stats import (
    CellSummary,
    check_embeddings,
    column_tests,
    concat_column_tests,
    summarize,
    thin_shell_cv,
)


def test_clean_embeddings_pass(rng):
    assert check_embeddings(rng.normal(size=(8, 3))) == ""


def test_nan_and_inf_counted(rng):
    z = rng.normal(size=(20, 4))
    z[0, 0] = z[3, 1] = np.nan
    z[5, 2] = -np.inf
    assert check_embeddings(z) == "contains 2 NaN and 1 infinite value(s) out of 80"


def test_constant_coordinates_named(rng):
    z = rng.normal(size=(20, 5))
    z[:, 1] = 0.0
    z[:, 4] = 3.5
    assert check_embeddings(z) == "2 constant coordinate(s) (zero variance) at index 1, 4"


def test_too_few_rows(rng):
    assert check_embeddings(rng.normal(size=(5, 3))) == (
        "only 5 row(s); at least min_rows = 8 are needed"
    )
    assert check_embeddings(rng.normal(size=(5, 3)), min_rows=5) == ""


def test_reasons_are_joined_and_shape_checked(rng):
    z = rng.normal(size=(4, 3))
    z[1, 1] = np.inf
    assert check_embeddings(z) == (
        "only 4 row(s); at least min_rows = 8 are needed; "
        "contains 0 NaN and 1 infinite value(s) out of 12"
    )
    assert "expected a 2-D (N, d) real array" in check_embeddings(np.ones(5))


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda z: z.__setitem__((2, 2), np.nan), "contains 1 NaN and 0 infinite value(s)"),
        (lambda z: z.__setitem__((2, 2), np.inf), "contains 0 NaN and 1 infinite value(s)"),
        (
            lambda z: z.__setitem__((slice(None), 3), 1.0),
            "constant coordinate(s) (zero variance) at index 3",
        ),
    ],
)
def test_summarize_fails_instead_of_raising(mutate, reason, rng):
    z = rng.normal(size=(50, 6))
    mutate(z)
    s = summarize(z)
    assert s.status == "failed" and reason in s.reason
    assert (s.n, s.d) == (50, 6) and np.isnan(s.cv) and np.isnan(s.ad_mean)


def test_summarize_too_few_rows_and_zero_rows(rng):
    s = summarize(rng.normal(size=(3, 4)))
    assert s.status == "failed" and s.reason == "only 3 row(s); at least min_rows = 8 are needed"
    z = rng.normal(size=(30, 4))
    z[7] = 0.0
    s = summarize(z, representation="normalized")
    assert s.reason == "normalized: 1 row(s) with zero L2 norm cannot be normalised"
    s = summarize(z, z_pos=z[:10])
    assert s.reason == "z_pos.shape = (10, 4) differs from z.shape = (30, 4)"


def test_summarize_values(rng):
    z = rng.normal(size=(400, 16)).astype(np.float32)
    z_pos = z + 0.1 * rng.normal(size=z.shape).astype(np.float32)
    s = summarize(z, z_pos)
    tests = column_tests(z)
    assert s.status == "ok" and s.reason == "" and (s.n, s.d) == (400, 16)
    assert s.cv == pytest.approx(thin_shell_cv(z), rel=1e-12)
    assert s.ad_mean == pytest.approx(tests.ad.mean(), rel=1e-12)
    assert s.dp_pass_frac == pytest.approx(np.mean(tests.dp_p > 0.05))
    assert 0 < s.align < 0.1 and -4 <= s.uniform <= 0 and 1 <= s.eff_rank <= 16
    assert abs(s.neg_cos_mean) < 0.02
    assert np.isnan(summarize(z).align)


def test_summarize_uses_given_tests_from_blocks(rng):
    z = rng.laplace(size=(200, 10))
    blocks = concat_column_tests([column_tests(z[:, :4]), column_tests(z[:, 4:])])
    given, own = summarize(z, tests=blocks), summarize(z)
    # the given tests are used as they are (the same np.mean of the same array: equal) ...
    assert given.ad_mean == float(np.mean(blocks.ad))
    assert given.dp_stat_mean == float(np.mean(blocks.dp_stat))
    # ... and agree with the tests on the whole matrix up to the rounding of another blocking:
    # ~N·eps on each O(1) statistic (see test_column_tests.test_concat_of_blocks_equals_whole)
    tol = 100 * z.shape[0] * float(np.finfo(np.float64).eps)
    for field, value in asdict(own).items():
        if isinstance(value, float):
            assert getattr(given, field) == pytest.approx(value, rel=0, abs=tol, nan_ok=True), field
        else:
            assert getattr(given, field) == value, field
    with pytest.raises(ValueError, match=r"tests.ad.shape = \(4,\): expected \(10,\)"):
        summarize(z, tests=column_tests(z[:, :4]))


def test_normalized_representation(rng):
    z = rng.normal(size=(300, 8)) * rng.uniform(1, 3, size=(300, 1))
    s = summarize(z, representation="normalized")
    unit = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert s.cv < 1e-12
    assert s.ad_mean == pytest.approx(column_tests(unit).ad.mean(), rel=1e-12)
    with pytest.raises(ValueError, match=r"representation = 'unit': must be one of"):
        summarize(z, representation="unit")


def test_summary_fields_and_frozen(rng):
    s = summarize(rng.normal(size=(30, 3)))
    row = asdict(s)  # what the stats table's row is made from
    assert list(row)[:4] == ["status", "reason", "n", "d"]
    assert set(row) == {f.name for f in CellSummary.__dataclass_fields__.values()}
    with pytest.raises(AttributeError):
        s.cv = 0.0
