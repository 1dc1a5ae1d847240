"""Few-shot probes (label efficiency, issue #26): the episode draw is balanced (exactly ``shots``
per class) and never holds a test row (CLIP_benchmark's issue #125), it is a function of its key
(cell, shots, episode); the linear probe on a draw agrees with scikit-learn fitted by hand on
the same rows, its choice of C with a cross-validation loop written from the docstring; the
stage's rows, their summary over episodes, the report's curve; and the config's errors."""

from __future__ import annotations

import copy
import hashlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps
from sklearn.linear_model import LogisticRegression

from pipeline.config import ConfigError, from_mapping
from pipeline.probe.fewshot import (
    MAX_FOLDS,
    check_disjoint,
    draw_episode,
    episode_generator,
    episode_seed,
    fewshot_knn,
    fewshot_linear_probe,
)
from pipeline.probe.frozen import ProbeSettings
from pipeline.probe.knn import weighted_knn
from pipeline.report.grid.figure_plan import fewshot_panels, fewshot_specs
from pipeline.report.render.figures import draw
from pipeline.runtime.backends.probe_ops import fewshot_rows, fewshot_summary

GRID = [0.01, 0.1, 1.0]  # the large C of the default grid: slow fits on separable rows


def _blobs(n: int, k: int, d: int, spread: float,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    means = rng.normal(size=(k, d)) * spread
    y = rng.integers(0, k, n)
    return (means[y] + rng.normal(size=(n, d))).astype(np.float32), y, means


# --- the draw ---------------------------------------------------------------------------------

def test_every_draw_is_balanced_and_holds_no_test_row(rng):
    """500 random label vectors, test splits and shots: per class exactly ``shots`` distinct
    rows, none of them a test row, every class outside the test rows present."""
    for _ in range(500):
        n, k = int(rng.integers(10, 400)), int(rng.integers(2, 8))
        labels = rng.integers(0, k, n) + int(rng.integers(-3, 50))  # any integer ids
        test = rng.choice(n, size=int(rng.integers(0, n // 2 + 1)), replace=False)
        pool = sorted(set(range(n)) - set(test.tolist()))
        counts: dict[int, int] = {}
        for i in pool:
            counts[int(labels[i])] = counts.get(int(labels[i]), 0) + 1
        if not counts:
            continue
        shots = int(rng.integers(1, min(counts.values()) + 1))
        rows = draw_episode(labels, shots, np.random.default_rng(int(rng.integers(2**32))), test)
        assert len(set(rows.tolist())) == rows.size and list(rows) == sorted(rows)
        assert not set(rows.tolist()) & set(test.tolist())  # leakage
        drawn: dict[int, int] = {}
        for i in rows.tolist():
            drawn[int(labels[i])] = drawn.get(int(labels[i]), 0) + 1
        assert drawn == {c: shots for c in counts}  # balance: every class, exactly shots


def test_the_test_rows_are_never_drawn_even_where_they_are_most_of_a_class(rng):
    """The test rows of class 0 are 95 of its 100 rows: 5 shots must be the other 5, always."""
    labels = np.repeat([0, 1], 100)
    test = np.concatenate([np.arange(95), np.arange(100, 150)])
    for seed in range(50):
        rows = draw_episode(labels, 5, np.random.default_rng(seed), test)
        assert set(rows[labels[rows] == 0].tolist()) == {95, 96, 97, 98, 99}
    with pytest.raises(ValueError, match=r"shots = 6: class 0 has 5 training rows \(fewer than 6"):
        draw_episode(labels, 6, np.random.default_rng(0), test)


def test_an_overlap_is_an_error():
    check_disjoint(np.array([0, 1, 2]), np.array([3, 4]))
    with pytest.raises(ValueError, match=r"share 2 row\(s\) \[2, 3\]"):
        check_disjoint(np.array([0, 2, 3]), np.array([3, 2, 7]))


def test_a_short_class_is_named_with_its_count():
    labels = np.array([0] * 10 + [1] * 3 + [2] * 10)
    with pytest.raises(ValueError, match="shots = 5: class 1 has 3 training rows.*allowed: "
                                         "shots <= 3"):
        draw_episode(labels, 5, np.random.default_rng(0))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=f"shots = {bad!r}: must be an integer >= 1"):
            draw_episode(labels, bad, np.random.default_rng(0))


def test_the_draw_is_a_function_of_its_key():
    labels = np.repeat(np.arange(10), 500)
    test = np.arange(0, labels.size, 7)

    def rows(seed: int, cell: str, shots: int, episode: int) -> np.ndarray:
        return draw_episode(labels, shots, episode_generator(seed, cell, shots, episode), test)

    assert np.array_equal(rows(0, "c1", 5, 0), rows(0, "c1", 5, 0))  # same key, same rows
    assert not np.array_equal(rows(0, "c1", 5, 0), rows(0, "c1", 5, 1))  # episodes differ
    assert not np.array_equal(rows(0, "c1", 5, 0), rows(0, "c2", 5, 0))  # cells differ
    assert not np.array_equal(rows(0, "c1", 5, 0), rows(1, "c1", 5, 0))  # seeds differ
    firsts = {tuple(rows(0, "c1", 1, e)) for e in range(20)}
    assert len(firsts) == 20
    # the seed is the key through pipeline.seeding: SHA-256 of "seed/cell/fewshot/shots/episode"
    digest = hashlib.sha256(b"3/c1/fewshot/5/2").digest()
    assert episode_seed(3, "c1", 5, 2) == int.from_bytes(digest[:8], "little") & (2**63 - 1)


# --- the probes on a draw -----------------------------------------------------------------------

def _standardised(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """By hand: the training rows' mean and std (ddof 0), constant columns left unscaled."""
    mean, std = train.mean(0), train.std(0)
    std = np.where(std == 0, 1.0, std)
    return [(a - mean) / std for a in (train, *others)]


def _sklearn(x: np.ndarray, y: np.ndarray, c: float) -> LogisticRegression:
    return LogisticRegression(C=c, tol=1e-8, max_iter=20_000).fit(x, y)


def test_a_separable_toy_problem_is_solved_like_sklearn_solves_it(rng):
    x, y, means = _blobs(3000, 4, 8, 3.0, rng)
    yt = rng.integers(0, 4, 1000)
    xt = (means[yt] + rng.normal(size=(1000, 8))).astype(np.float32)
    rows = draw_episode(y, 10, np.random.default_rng(1))
    res = fewshot_linear_probe(x[rows], y[rows], xt, yt, GRID, np.random.default_rng(2),
                               dtype=torch.float64, tol=1e-6)
    assert res.accuracy >= 0.98 and res.n_train == 40 and res.n_classes == 4
    a, b = _standardised(x[rows].astype(float), xt.astype(float))
    ref = _sklearn(a, y[rows], res.c)
    assert res.accuracy == pytest.approx(float((ref.predict(b) == yt).mean()), abs=1e-3)


@pytest.mark.parametrize("shots", [1, 4, 12])
def test_a_hard_problem_agrees_with_sklearn_on_the_same_draw(shots, rng):
    """Overlapping classes (accuracy well below 1): the held-out accuracy of the few-shot probe
    and of scikit-learn's LogisticRegression with the same C, fitted by hand on the same rows
    with the same standardisation, agree to a test point or two."""
    x, y, means = _blobs(2000, 5, 6, 0.6, rng)
    yt = rng.integers(0, 5, 2000)
    xt = (means[yt] + rng.normal(size=(2000, 6))).astype(np.float32)
    rows = draw_episode(y, shots, np.random.default_rng(shots))
    res = fewshot_linear_probe(x[rows], y[rows], xt, yt, GRID, np.random.default_rng(3),
                               dtype=torch.float64, tol=1e-6)
    a, b = _standardised(x[rows].astype(float), xt.astype(float))
    ref = float((_sklearn(a, y[rows], res.c).predict(b) == yt).mean())
    assert 0.3 < ref < 0.95  # a problem where the fit matters
    assert res.accuracy == pytest.approx(ref, abs=2 / 2000)
    assert res.n_train == 5 * shots  # nothing beyond the draw was fitted (issue #125)


def test_one_shot_fixes_c_to_the_smallest(rng):
    x, y, _ = _blobs(500, 3, 4, 2.0, rng)
    rows = draw_episode(y, 1, np.random.default_rng(0))
    res = fewshot_linear_probe(x[rows], y[rows], x[:50], y[:50], [10.0, 0.1, 1.0],
                               np.random.default_rng(0))
    assert res.c == 0.1 and res.val_accuracy == () and res.n_val == 0 and res.n_train == 3


@pytest.mark.parametrize("shots", [3, 8])
def test_the_choice_of_c_is_the_cross_validation_of_the_docstring(shots, rng):
    """A loop from the docstring: each class's rows in rng.permutation order dealt to
    f = min(shots, 5) folds; scikit-learn fitted on the other folds per C; accuracy summed over
    folds; the first maximum chosen."""
    x, y, _ = _blobs(1000, 4, 5, 0.8, rng)
    rows = draw_episode(y, shots, np.random.default_rng(7))
    xs, ys = x[rows].astype(float), y[rows]
    res = fewshot_linear_probe(xs, ys, x[:200], y[:200], GRID, np.random.default_rng(11),
                               dtype=torch.float64, tol=1e-6)
    f = min(shots, MAX_FOLDS)
    order = np.random.default_rng(11)
    fold = np.empty(ys.size, dtype=int)
    for c in np.unique(ys):
        members = order.permutation(np.flatnonzero(ys == c))
        fold[members] = np.arange(members.size) % f
    (std,) = _standardised(xs)
    correct = np.zeros(len(GRID))
    for j in range(f):
        for i, c in enumerate(GRID):
            fit = _sklearn(std[fold != j], ys[fold != j], c)
            correct[i] += (fit.predict(std[fold == j]) == ys[fold == j]).sum()
    assert np.allclose(res.val_accuracy, correct / ys.size, atol=1.01 / ys.size)
    assert res.n_val == ys.size
    best = correct.max()
    assert correct[GRID.index(res.c)] >= best - 1  # the chosen C is a best one (to a point)


def test_knn_with_k_above_the_bank_lets_every_row_vote(rng):
    x, y, _ = _blobs(400, 4, 6, 1.5, rng)
    rows = draw_episode(y, 2, np.random.default_rng(0))
    res = fewshot_knn(x[rows], y[rows], x[:100], y[:100], [3, 20, 200], 0.07)
    everyone = weighted_knn(x[rows], y[rows], x[:100], y[:100], [8], 0.07)[8]
    assert res[20].accuracy == res[200].accuracy == everyone.accuracy and res[20].k == 8
    assert res[3].k == 3


# --- the stage's rows, the summary, the curve ----------------------------------------------------

def _settings(shots: tuple[int, ...], episodes: int) -> ProbeSettings:
    return ProbeSettings(c_grid=[0.1, 1.0], val_fraction=0.2, knn_k=[3, 50],
                         knn_temperature=0.07, level=0.95, shots=shots, episodes=episodes)


def test_the_rows_of_a_cell(rng):
    x, y, means = _blobs(300, 3, 6, 2.0, rng)
    y[y == 2] = np.where(np.arange((y == 2).sum()) < 7, 2, 0)  # class 2: 7 training rows
    yt = rng.integers(0, 3, 90)
    xt = (means[yt] + rng.normal(size=(90, 6))).astype(np.float32)
    dataset = SimpleNamespace(x_train=x, y_train=y, x_heldout=xt, y_heldout=yt)
    cell = SimpleNamespace(seed=4, cell_id="abc")
    train = {"head": x[:, :4].copy(), "backbone": x.copy()}
    test = {"head": xt[:, :4].copy(), "backbone": xt.copy()}
    rows = pd.DataFrame(fewshot_rows(cell, dataset, train, test, _settings((2, 5, 10), 3)))
    ok, failed = rows[rows.fewshot_status == "ok"], rows[rows.fewshot_status == "failed"]
    assert len(ok) == 2 * 3 * 2 and set(ok.layer) == {"head", "backbone"}  # shots 2, 5
    assert len(failed) == 3 and (failed.shots == 10).all()  # class 2 has 7 < 10
    assert failed.fewshot_reason.str.contains("probe.shots = 10: class 2 has 7 training").all()
    assert (ok.n_train == 3 * ok.shots).all() and (ok.n_test == 90).all()
    assert {"linear_probe", "weighted_knn_3", "weighted_knn_50", "raw_linear_probe",
            "raw_weighted_knn_50", "linear_probe_c", "raw_linear_probe_c"} <= set(ok.columns)
    assert ok.linear_probe.between(0, 1).all() and ok.raw_linear_probe.between(0, 1).all()
    assert rows.episode_seed.tolist() == [episode_seed(4, "abc", s, e) for s, e in zip(
        rows.shots, rows.episode, strict=True)]
    # the raw baseline is scored on the same draw for every representation of an episode
    raw = ok.groupby(["shots", "episode"]).raw_linear_probe.nunique()
    assert (raw == 1).all()
    # the backbone here is the raw input itself: on the same draw and folds, its scores are the
    # raw baseline's
    back = ok[ok.layer == "backbone"]
    for col in ("linear_probe", "linear_probe_c", "weighted_knn_3", "weighted_knn_50"):
        assert np.allclose(back[col], back[f"raw_{col}"]), col
    again = pd.DataFrame(fewshot_rows(cell, dataset, train, test, _settings((2, 5, 10), 3)))
    pd.testing.assert_frame_equal(rows, again)  # deterministic


def test_the_summary_is_the_mean_and_t_interval_over_episodes(rng):
    table = pd.DataFrame({"cell_id": "a", "layer": "head", "shots": np.repeat([1, 5], 4),
                          "episode": np.tile(range(4), 2), "fewshot_status": "ok",
                          "linear_probe": rng.uniform(size=8),
                          "raw_linear_probe": rng.uniform(size=8)})
    table.loc[7, "fewshot_status"] = "failed"
    out = fewshot_summary(table, 0.9).set_index("shots")
    for shots, n in ((1, 4), (5, 3)):
        v = table[(table.shots == shots) & (table.fewshot_status == "ok")].linear_probe
        lo, hi = sps.t.interval(0.9, n - 1, loc=v.mean(), scale=sps.sem(v))
        assert out.loc[shots, "episodes"] == n
        assert out.loc[shots, "linear_probe_mean"] == pytest.approx(v.mean())
        assert (out.loc[shots, "linear_probe_lo"], out.loc[shots, "linear_probe_hi"]) == (
            pytest.approx(lo), pytest.approx(hi))
    assert fewshot_summary(pd.DataFrame(), 0.9).empty


def test_the_curve_averages_episode_means_over_seeds():
    cells = pd.DataFrame({"cell_id": ["a", "b", "c", "d"], "status": ["ok"] * 3 + ["failed"],
                          "loss": ["infonce", "infonce", "dcl", "dcl"]})
    summary = pd.DataFrame({
        "cell_id": np.repeat(["a", "b", "c", "d"], 2), "layer": "head",
        "shots": [1, 5] * 4, "linear_probe_mean": [0.2, 0.6, 0.4, 0.8, 0.3, 0.5, 0.9, 0.9],
        "raw_linear_probe_mean": [0.1, 0.3, 0.2, 0.4, 0.1, 0.2, 0.0, 0.0],
        "weighted_knn_50_mean": 0.5, "weighted_knn_3_mean": 0.4,
        "raw_weighted_knn_50_mean": 0.1, "raw_weighted_knn_3_mean": 0.2})
    bars = fewshot_panels(summary, cells, 0.95)
    assert bars is not None and [p.value for p in bars.panels] == ["linear_probe",
                                                                    "weighted_knn_3"]
    losses, raw = bars.panels[0].sets
    infonce = dict(zip([line.key for line in losses.lines], losses.lines, strict=True))
    pts = infonce[("infonce",)].points.set_index("shots")
    assert pts.loc[5, "mean"] == pytest.approx(0.7)  # (0.6 + 0.8) / 2 over the two seeds
    half = sps.t.ppf(0.975, 1) * np.std([0.6, 0.8], ddof=1) / np.sqrt(2)
    assert pts.loc[5, "hi"] == pytest.approx(0.7 + half)
    dcl = infonce[("dcl",)].points.set_index("shots")
    assert dcl.loc[1, "mean"] == 0.3 and np.isnan(dcl.loc[1, "lo"])  # one ok cell: no interval
    assert raw.tag == "raw input"
    assert raw.lines[0].points.set_index("shots").loc[5, "mean"] == pytest.approx(0.3)
    (spec,) = fewshot_specs(summary, cells, 0.95)
    assert draw(spec).png.startswith(b"\x89PNG")
    assert fewshot_specs(pd.DataFrame(), cells, 0.95) == []


# --- the config ------------------------------------------------------------------------------

@pytest.mark.parametrize(("probe", "message"), [
    ({"shots": [0, 5]}, "probe.shots[0] = 0: input should be greater than or equal to 1"),
    ({"shots": [5, 1, 5]}, "probe.shots[2] = 5: duplicate value; list each value once"),
    ({"shots": [1.5]}, "probe.shots[0] = 1.5: input should be a valid integer"),
    ({"shots": 5}, "probe.shots = 5: input should be a valid list"),
    ({"shots": [301]}, "probe.shots[0] = 301: 2 classes × 301 shots > data.n_train = 600"),
    ({"episodes": 0}, "probe.episodes = 0: input should be greater than or equal to 1"),
])
def test_bad_few_shot_settings_are_refused_by_name(probe, message, tiny_params):
    params = copy.deepcopy(tiny_params)
    params["probe"].update(probe)
    with pytest.raises(ConfigError) as err:
        from_mapping(params)
    assert message in str(err.value)


def test_the_default_is_off_and_a_file_without_the_keys_reads_as_before(tiny_params):
    params = copy.deepcopy(tiny_params)
    assert from_mapping(params).probe.shots == []  # params.yaml: off
    for key in ("shots", "episodes"):
        del params["probe"][key]
    p = from_mapping(params).probe
    assert p.shots == [] and p.episodes == 5
    params["probe"].update(shots=[1, 5, 10, 50], episodes=3)
    assert from_mapping(params).probe.shots == [1, 5, 10, 50]


# --- the stage on real cells ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.ray
def test_the_stage_writes_the_episodes_and_their_summary(tiny_params, tmp_path, monkeypatch,
                                                         capsys):
    import yaml

    from pipeline.runtime.context import PROBE, PROBE_FEWSHOT, PROBE_FEWSHOT_SUMMARY
    from stages import prepare, probe, resolve, train

    tiny_params["data"].update(name="gaussian_mixture", options={"input_dim": 16, "components": 4})
    tiny_params["grid"].update(arch=["mlp"], k=[4])
    tiny_params["arch_options"] = {"mlp": {"hidden": [32]}}
    tiny_params["probe"].update(c_grid=[0.1, 1.0], knn_k=[5, 50], shots=[1, 5, 200],
                                episodes=2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "store"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    try:
        for stage in (resolve, prepare, train, probe):
            assert stage.main([]) == 0, stage.__name__
    finally:
        import ray

        ray.shutdown()
    err = capsys.readouterr().err
    assert "probe.shots[2] = 200: class" in err and "recorded as failed" in err
    full = pd.read_parquet(tmp_path / PROBE)
    assert set(full.probe_status) == {"ok"}
    table = pd.read_parquet(tmp_path / PROBE_FEWSHOT)
    ok = table[table.fewshot_status == "ok"]
    assert len(ok) == 2 * 2 * 2  # shots 1 and 5 × 2 episodes × (head, backbone)
    assert (table[table.shots == 200].fewshot_status == "failed").all()
    assert (ok.n_train == 4 * ok.shots).all() and (ok.n_test == 200).all()
    summary = pd.read_parquet(tmp_path / PROBE_FEWSHOT_SUMMARY)
    assert len(summary) == 2 * 2 and (summary.episodes == 2).all()
    assert summary.linear_probe_lo.le(summary.linear_probe_mean).all()
