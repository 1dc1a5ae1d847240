"""``cbench diff``: cells added, removed and retrained; numbers beyond their interval over
seeds (and not within it); tiers and order of ranks; a release against the workspace."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.release.bundle import ReleaseError, write_release
from pipeline.release.diff import diff, side, to_markdown
from tests.release.workspace import cells_frame, leaderboard, ranks, write_workspace


@pytest.fixture
def base(tmp_path):
    return write_release("a", write_workspace(tmp_path / "a"), tmp_path / "releases", "c1")


def _release(tmp_path, name, cells=None, rank_table=None):
    ws = write_workspace(tmp_path / name, cells, rank_table)
    return write_release(name, ws, tmp_path / "releases", "c2")


def test_the_same_results_are_no_change(base, tmp_path):
    d = diff(side(base), side(_release(tmp_path, "b")))
    assert not d.changed and d.unchanged_numbers == 12  # 6 settings × 2 headline metrics
    assert "No change" in to_markdown(d)


def test_a_release_against_its_own_workspace(base, tmp_path):
    assert not diff(side(base), side(tmp_path / "a")).changed


def test_cells_added_removed_and_retrained(base, tmp_path):
    cells = cells_frame()
    dcl = cells.loss == "dcl"
    cells.loc[dcl, "version"] = "bbbb1111"  # the loss's code changed: its cells retrained
    gone = cells.cell_id.iloc[0]
    extra = cells.iloc[[1]].assign(cell_id="feedfeedfeed", training_id="feedfeedfeed")
    cells = pd.concat([cells.iloc[1:], extra], ignore_index=True)
    d = diff(side(base), side(_release(tmp_path, "b", cells)))
    assert d.added == ["feedfeedfeed"] and d.removed == [gone]
    assert {c for c, _, _ in d.retrained} == set(cells.cell_id[cells.loss == "dcl"])
    assert all((a, b) == ("aaaa0000", "bbbb1111") for _, a, b in d.retrained)
    text = to_markdown(d)
    assert "1 added, 1 removed, 6 retrained by other code" in text and "`feedfeedfeed`" in text


def test_a_number_moves_only_beyond_its_interval(base, tmp_path):
    before = leaderboard(cells_frame())
    half = float((before.recall_at_1_hi - before.recall_at_1_lo).min()) / 2
    inside = _release(tmp_path, "inside", cells_frame({"dcl": 0.3 * half}))
    assert not diff(side(base), side(inside)).moved  # within the interval: not a move
    beyond = _release(tmp_path, "beyond", cells_frame({"dcl": 0.2}))
    d = diff(side(base), side(beyond))
    assert {(m.metric, m.setting.split(", ")[1]) for m in d.moved} == {("recall_at_1",
                                                                        "loss=dcl")}
    assert len(d.moved) == 2  # both k of dcl
    for m in d.moved:  # the rule: one side's mean lies outside the other's interval
        assert not m.a_interval[0] <= m.b <= m.a_interval[1] or \
            not m.b_interval[0] <= m.a <= m.b_interval[1]
    assert "| R@1 |" in to_markdown(d)


def test_one_seed_has_no_interval_so_any_change_counts(tmp_path):
    a = _release(tmp_path, "a1", cells_frame(seeds=1))
    b = _release(tmp_path, "b1", cells_frame({"weince": 1e-6}, seeds=1))
    d = diff(side(a), side(b))
    assert {m.setting.split(", ")[1] for m in d.moved} == {"loss=weince"}
    assert all(m.a_interval is None for m in d.moved) and "(1 seed)" in to_markdown(d)


def test_tiers_and_order_of_ranks(base, tmp_path):
    b = _release(tmp_path, "b", rank_table=ranks(("dcl", "weince", "infonce"), (1, 2, 2)))
    d = diff(side(base), side(b))
    assert ("weince", 1, 2) in d.tiers and ("infonce", 2, 2) not in d.tiers
    assert d.order == (["weince", "dcl", "infonce"], ["dcl", "weince", "infonce"])
    assert "weince: tier 1 → 2" in to_markdown(d)


def test_settings_on_one_side_only(base, tmp_path):
    cells = cells_frame()
    b = _release(tmp_path, "b", cells[cells.k != 16])
    d = diff(side(base), side(b))
    assert len(d.settings_only_a) == 3 and not d.settings_only_b
    assert all("k=16" in s for s in d.settings_only_a)


def test_a_folder_that_is_neither_is_refused(tmp_path):
    with pytest.raises(ReleaseError, match=r"neither a release .* nor a workspace"):
        side(tmp_path)
