"""The leaderboard across tasks (pipeline.report.suite: board, publish; stages.suite_report):
cells frames built by hand, every aggregate checked against a loop written from its definition
(SPEC §6) or SciPy."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.report.suite.board import TaskInput, suite_board, task_scores
from pipeline.report.suite.publish import write_suite

GROUP_BY = ["loss", "k", "tau", "arch"]
PDFLATEX = shutil.which("pdflatex")


def cell(loss, seed, tau=0.1, status="ok", **values):
    """One cells.csv row: a contrastive cell of ``loss`` at τ = ``tau`` and ``seed``."""
    return {"objective": "contrastive", "loss": loss, "k": 16, "tau": tau, "arch": "linear",
            "seed": seed, "status": status, "cell_id": f"{loss}-{tau}-{seed}",
            "train_seconds": 2.0, "peak_rss_bytes": 1e8, **values}


def task_cells(rng, means, seeds=3, halves=True, metric="recall_at_1"):
    """A task's cells: one setting per loss, ``seeds`` seeds around ``means[loss]``; returns the
    frame and the reported values as {loss: per-seed array}."""
    rows, reported = [], {}
    for loss, mu in means.items():
        x = mu + rng.normal(0, 0.03, seeds)
        reported[loss] = x
        for s, v in enumerate(x):
            extra = {metric: v + rng.normal(0, 0.01)}
            if halves:
                extra |= {f"{metric}_select": v + rng.normal(0, 0.01), f"{metric}_report": v}
            else:
                extra[metric] = v
            rows.append(cell(loss, s, **extra))
    return pd.DataFrame(rows), reported


def board_of(scores, metric="recall_at_1", types=None, **kw):
    """A board from ``scores``: {task: {loss: per-seed values}}, each value a cell's
    ``metric`` (no halves)."""
    tasks = []
    for i, (name, by_loss) in enumerate(scores.items()):
        rows = [cell(loss, s, **{metric: v}) for loss, x in by_loss.items()
                for s, v in enumerate(x)]
        kind = types[i] if types else "vectors"
        tasks.append(TaskInput(name, kind, False, pd.DataFrame(rows)))
    return suite_board(tasks, metric, GROUP_BY, n_boot=200, **kw)


def test_a_loss_that_misses_a_task_is_shown_missing_and_left_out_of_the_means():
    rng = np.random.default_rng(0)
    tasks, reported = [], {}
    for i in range(4):
        means = {"a": 0.3, "b": 0.5, "c": 0.4} if i != 2 else {"a": 0.3, "b": 0.5}
        frame, reported[f"t{i}"] = task_cells(rng, means)
        tasks.append(TaskInput(f"t{i}", "vectors", False, frame))
    board = suite_board(tasks, "recall_at_1", GROUP_BY, n_boot=200)

    row = board.per_task[(board.per_task.task == "t2") & (board.per_task.loss == "c")]
    assert len(row) == 1 and bool(row.missing.iloc[0]) and np.isnan(row["mean"].iloc[0])
    agg = board.aggregate.set_index("loss")
    assert agg.loc["c", "tasks"] == 3 and agg.loc["c", "tasks_total"] == 4
    assert np.isnan(agg.loc["c", "mean"])
    complete = [t for t in reported if t != "t2"]
    assert (agg.tasks_ranked == 3).all()
    means = np.array([[reported[t][x].mean() for x in ("a", "b", "c")] for t in complete])
    ranks = sps.rankdata(-means, axis=1)
    np.testing.assert_allclose(agg.loc[["a", "b", "c"], "mean_rank"], ranks.mean(axis=0))
    for loss in ("a", "b"):  # a hand mean over all 4 tasks of the per-seed means
        expected = np.mean([reported[t][loss].mean() for t in reported])
        assert agg.loc[loss, "mean"] == pytest.approx(expected, rel=1e-12)
    assert any("c misses task t2: ranked over 3 of 4 tasks; no mean over all tasks" in n
               for n in board.notes)


def test_the_setting_is_chosen_on_the_selection_half_and_reported_on_the_other():
    # τ = 0.1 is best on the selection half, τ = 0.5 on the report half and on the full set
    rows = []
    for s, (sel1, rep1, sel5, rep5) in enumerate([(0.60, 0.30, 0.40, 0.90),
                                                  (0.62, 0.32, 0.41, 0.91),
                                                  (0.58, 0.28, 0.39, 0.89)]):
        rows.append(cell("a", s, 0.1, recall_at_1=0.5, recall_at_1_select=sel1,
                         recall_at_1_report=rep1))
        rows.append(cell("a", s, 0.5, recall_at_1=0.95, recall_at_1_select=sel5,
                         recall_at_1_report=rep5))
    rows.append(cell("a", 3, 0.5, status="failed", train_seconds=7.0, peak_rss_bytes=5e8))
    rows.append(cell("b", 0, 0.1, status="failed"))  # no ok cell: absent
    cells = pd.DataFrame(rows)
    choice = task_scores(cells, "recall_at_1", GROUP_BY)
    assert set(choice) == {"a"}
    a = choice["a"]
    assert a.setting == {"k": 16, "tau": 0.1, "arch": "linear"} and not a.chosen_on_reported
    np.testing.assert_array_equal(a.scores, [0.30, 0.32, 0.28])
    assert a.seeds == (0, 1, 2) and a.chosen_on == pytest.approx(0.60)
    # costs over every cell of the loss, the failed one included
    assert a.cells == 7 and a.train_seconds_total == pytest.approx(6 * 2.0 + 7.0)
    assert a.peak_rss_bytes_max == 5e8
    # without halves: chosen and reported on recall_at_1 itself, and it says so
    plain = task_scores(cells.drop(columns=["recall_at_1_select", "recall_at_1_report"]),
                        "recall_at_1", GROUP_BY)["a"]
    assert plain.chosen_on_reported and plain.setting["tau"] == 0.5
    np.testing.assert_array_equal(plain.scores, [0.95] * 3)


def win_rate_loop(means, higher=True):
    """HELM's mean win rate from its definition: over (task, other loss) pairs, ties ½."""
    sign = 1.0 if higher else -1.0
    n, m = means.shape
    out = []
    for j in range(m):
        wins = total = 0.0
        for i in range(n):
            for k in range(m):
                if k != j:
                    a, b = sign * means[i, j], sign * means[i, k]
                    wins += 1.0 if a > b else 0.5 if a == b else 0.0
                    total += 1
        out.append(wins / total)
    return np.array(out)


def test_borda_mean_rank_and_win_rate_on_a_hand_made_case():
    scores = {"t0": {"a": [0.9, 0.8], "b": [0.5, 0.6], "c": [0.1, 0.2]},
              "t1": {"a": [0.4, 0.4], "b": [0.4, 0.4], "c": [0.7, 0.9]},  # a ties b
              "t2": {"a": [0.6, 0.7], "b": [0.2, 0.1], "c": [0.3, 0.35]}}
    board = board_of(scores)
    losses = ["a", "b", "c"]
    means = np.array([[np.mean(scores[t][x]) for x in losses] for t in scores])
    ranks = np.array([sps.rankdata(-row) for row in means])
    agg = board.aggregate.set_index("loss").loc[losses]
    np.testing.assert_allclose(agg.mean_rank, ranks.mean(axis=0))
    borda = (len(losses) - ranks).sum(axis=0)
    np.testing.assert_allclose(agg.borda, borda)
    np.testing.assert_array_equal(agg.borda_rank, sps.rankdata(-borda, method="min"))
    np.testing.assert_allclose(agg.win_rate, win_rate_loop(means))
    assert list(agg.win_rate_tasks) == [3, 3, 3]
    per = board.per_task.set_index(["task", "loss"])
    assert per.loc[("t1", "a"), "rank"] == per.loc[("t1", "b"), "rank"] == 2.5


def test_iqm_is_scipys_trimmed_mean_of_the_task_by_seed_scores():
    rng = np.random.default_rng(3)
    scores = {f"t{i}": {x: rng.uniform(0, 1, 5) for x in ("a", "b", "c")} for i in range(4)}
    board = board_of(scores)
    agg = board.aggregate.set_index("loss")
    for loss in ("a", "b", "c"):
        flat = np.concatenate([scores[t][loss] for t in scores])
        assert agg.loc[loss, "iqm"] == pytest.approx(sps.trim_mean(flat, 0.25), rel=1e-12)
        assert agg.loc[loss, "iqm_lo"] <= agg.loc[loss, "iqm"] <= agg.loc[loss, "iqm_hi"]
        assert agg.loc[loss, "iqm_tasks"] == 4 and agg.loc[loss, "iqm_scores"] == 20


def test_a_lower_is_better_primary_flips_the_ranks():
    scores = {"t0": {"a": [1.0, 1.1], "b": [2.0, 2.1], "c": [3.0, 3.2]},
              "t1": {"a": [0.5, 0.6], "b": [0.9, 1.0], "c": [0.2, 0.1]},
              "t2": {"a": [5.0, 5.5], "b": [4.0, 4.2], "c": [6.0, 6.1]}}
    up = board_of(scores, "recall_at_1").aggregate.set_index("loss").sort_index()
    down = board_of(scores, "risk_keval").aggregate.set_index("loss").sort_index()
    np.testing.assert_allclose(down.mean_rank, 4 - up.mean_rank)
    np.testing.assert_allclose(down.win_rate, 1 - up.win_rate)
    assert list(down.index[np.argsort(down.mean_rank.to_numpy())]) == ["a", "b", "c"]
    per = board_of(scores, "risk_keval").per_task.set_index(["task", "loss"])
    assert per.loc[("t1", "c"), "rank"] == 1 and per.loc[("t1", "b"), "rank"] == 3


def fewshot_summary(cells, shots=(1, 4)):
    """A probe_fewshot_summary for ``cells``: accuracy = 0.1 · shots + 0.01 · seed."""
    rows = [{"cell_id": c.cell_id, "layer": "head", "shots": s, "episodes": 5,
             "linear_probe_mean": 0.1 * s + 0.01 * c.seed,
             "linear_probe_lo": 0.1 * s + 0.01 * c.seed - 0.02,
             "linear_probe_hi": 0.1 * s + 0.01 * c.seed + 0.02}
            for c in cells.itertuples() for s in shots]
    return pd.DataFrame(rows)


def two_tasks(rng):
    one, _ = task_cells(rng, {"a": 0.3, "b": 0.5, "c": 0.4})
    two, _ = task_cells(rng, {"a": 0.35, "b": 0.45}, halves=False)
    return [TaskInput("vec_one", "vectors", False, one),
            TaskInput("img_two", "images", True, two, fewshot_summary(two))]


def test_the_label_efficiency_lines_are_the_chosen_settings_means_over_seeds():
    board = suite_board(two_tasks(np.random.default_rng(1)), "recall_at_1", GROUP_BY, n_boot=50)
    assert set(board.fewshot) == {"img_two"}
    lines = board.fewshot["img_two"].set_index(["loss", "shots"])
    # seeds 0, 1, 2: mean 0.1 · shots + 0.01
    assert lines.loc[("a", 4), "mean"] == pytest.approx(0.41)
    assert lines.loc[("a", 4), "lo"] == pytest.approx(0.39)
    assert lines.loc[("b", 1), "seeds"] == 3


def test_writers_produce_every_file(tmp_path):
    board = suite_board(two_tasks(np.random.default_rng(2)), "recall_at_1", GROUP_BY, n_boot=50,
                        name="demo")
    paths = write_suite(board, tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in paths}
    assert {"suite.md", "suite.tex", "suite.html", "suite_tasks.csv", "suite_aggregate.csv",
            "suite_pairs.csv", "plots/critical_difference.png", "plots/pareto.png",
            "plots/label_efficiency.png"} <= names
    md = (tmp_path / "suite.md").read_text()
    assert "## Task vec_one" in md and "## Task img_two" in md and "missing" in md
    assert "95% t-interval over seeds" in md
    html = (tmp_path / "suite.html").read_text()
    assert "data:image/png;base64," in html and "http" not in html.replace("http-equiv", "")
    tex = (tmp_path / "suite.tex").read_text()
    assert r"\toprule" in tex and "vec\\_one" in tex and "vec_one" not in tex
    tasks = pd.read_csv(tmp_path / "suite_tasks.csv")
    assert len(tasks) == 2 * 3 and tasks.missing.sum() == 1
    assert len(pd.read_csv(tmp_path / "suite_pairs.csv")) == 3


def test_without_a_second_task_or_few_shot_rows_the_page_says_why(tmp_path):
    frame, _ = task_cells(np.random.default_rng(4), {"a": 0.3, "b": 0.5})
    board = suite_board([TaskInput("only", "vectors", True, frame)], "recall_at_1", GROUP_BY,
                        n_boot=50)
    names = {p.name for p in write_suite(board, tmp_path)}
    assert "critical_difference.png" not in names and "label_efficiency.png" not in names
    md = (tmp_path / "suite.md").read_text()
    assert "No critical-difference diagram: 1 task" in md
    assert "No label-efficiency figure: no labelled task has few-shot rows" in md


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not on PATH")
def test_the_tex_compiles(tmp_path):
    board = suite_board(two_tasks(np.random.default_rng(5)), "recall_at_1", GROUP_BY, n_boot=50)
    write_suite(board, tmp_path)
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n"
                                      "\\usepackage{graphicx}\n\\begin{document}\n"
                                      "\\input{suite.tex}\n\\end{document}\n")
    proc = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]


def suite_folder(root, rng):
    tasks = two_tasks(rng)
    entries = []
    for t in tasks:
        (root / t.name / "reports").mkdir(parents=True)
        t.cells.to_csv(root / t.name / "reports" / "cells.csv", index=False)
        if len(t.fewshot):
            (root / t.name / "data").mkdir()
            t.fewshot.to_parquet(root / t.name / "data" / "probe_fewshot_summary.parquet")
        entries.append({"name": t.name, "type": t.type, "labelled": t.labelled,
                        "folder": t.name})
    suite = {"name": "demo", "primary": "recall_at_1", "group_by": GROUP_BY, "level": 0.95,
             "alpha": 0.05, "bootstrap": 50, "tasks": entries}
    (root / "suite.json").write_text(json.dumps(suite))
    return suite


def test_the_stage_writes_the_reports_of_a_suite_folder(tmp_path, monkeypatch, capsys):
    from stages import suite_report

    suite_folder(tmp_path, np.random.default_rng(6))
    monkeypatch.chdir(tmp_path)
    assert suite_report.main() == 0
    out = capsys.readouterr().out
    assert out.strip() == "suite_report: 2 tasks, 3 losses -> reports/suite.md"
    for name in ("suite.md", "suite.tex", "suite.html", "suite_tasks.csv",
                 "suite_aggregate.csv", "suite_pairs.csv", "plots/label_efficiency.png"):
        assert (tmp_path / "reports" / name).exists(), name


def test_the_stage_says_at_the_end_how_many_cells_failed(tmp_path, monkeypatch, capsys):
    from stages import suite_report

    first, second = suite_folder(tmp_path, np.random.default_rng(6))["tasks"]
    path = tmp_path / second["folder"] / "reports" / "cells.csv"
    cells = pd.read_csv(path)
    cells.loc[cells.index[0], "status"] = "failed"
    cells.to_csv(path, index=False)
    total = len(cells) + len(pd.read_csv(tmp_path / first["folder"] / "reports" / "cells.csv"))
    monkeypatch.chdir(tmp_path)
    assert suite_report.main() == 3
    assert f"1 of {total} cells failed ({second['name']} 1)" in capsys.readouterr().err
    assert (tmp_path / "reports" / "suite.md").exists()  # written first


def test_the_stage_refuses_arguments_and_names_a_missing_cells_file(tmp_path, monkeypatch):
    from stages import suite_report

    monkeypatch.chdir(tmp_path)
    assert suite_report.main(["x"]) == 2
    assert list(tmp_path.iterdir()) == []
    suite_folder(tmp_path, np.random.default_rng(7))
    (tmp_path / "img_two" / "reports" / "cells.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"img_two/reports/cells\.csv"):
        suite_report.main()
    assert not (tmp_path / "reports").exists()


def test_one_loss_gets_no_comparison_and_the_page_still_reads(tmp_path):
    frame, _ = task_cells(np.random.default_rng(8), {"a": 0.3})
    tasks = [TaskInput(n, "vectors", False, frame) for n in ("t0", "t1")]
    board = suite_board(tasks, "recall_at_1", GROUP_BY, n_boot=50)
    assert board.comparison is None and np.isnan(board.aggregate.mean_rank.iloc[0])
    assert any("No comparison across tasks: 1 loss" in n for n in board.notes)
    write_suite(board, tmp_path)
    assert "No critical-difference diagram: 1 loss entered every task" in (
        tmp_path / "suite.md").read_text()


def test_bad_inputs_are_refused_with_what_to_do():
    frame, _ = task_cells(np.random.default_rng(9), {"a": 0.3, "b": 0.4})
    task = TaskInput("t0", "vectors", False, frame)
    with pytest.raises(ValueError, match="primary = 'cv': CV is not ranked"):
        suite_board([task], "cv", GROUP_BY)
    with pytest.raises(ValueError, match="primary = 'eff_rank': no contrastive ok cell"):
        suite_board([task], "eff_rank", GROUP_BY)
    twice = pd.concat([frame, frame.assign(k=64)], ignore_index=True)
    with pytest.raises(ValueError, match=r"task 't0': group_by = \['loss', 'tau'\]: the chosen "
                                         r"setting of 'a' holds several cells of one seed; add "
                                         r"the axes that vary among them \(k\)"):
        suite_board([TaskInput("t0", "vectors", False, twice)], "recall_at_1", ["loss", "tau"])
    with pytest.raises(ValueError, match="alpha = 1.5: significance level must be in"):
        suite_board([task], "recall_at_1", GROUP_BY, alpha=1.5)
