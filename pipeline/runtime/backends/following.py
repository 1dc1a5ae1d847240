"""The train stage's progress bar over its cells' outcomes, whichever backend runs them (the
forked workers of :mod:`pipeline.runtime.backends.cell_workers` or Ray's tasks in
:mod:`pipeline.runtime.backends.executor`): both hand their outcomes, as they finish, to
:func:`follow`."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tqdm import tqdm

from pipeline.runtime.cells.one_cell import CellOutcome
from pipeline.runtime.progress import Tally, stage_desc, suite_task


def follow(outcomes: Iterable[CellOutcome], total: int, slots: int,
           on_done: Callable[[CellOutcome], None]) -> list[CellOutcome]:
    """The cells' outcomes as they finish, each handed to ``on_done``, behind the train stage's
    progress bar (cells done, failed, ETA over ``slots`` parallel cells)."""
    out = []
    tally = Tally(total, slots, suite_task())
    with tqdm(total=total, desc=stage_desc("cells"), unit="cell") as bar:
        bar.set_postfix_str(tally.postfix())
        for outcome in outcomes:
            on_done(outcome)
            out.append(outcome)
            tally.finished(outcome.status, outcome.wall_seconds)
            bar.set_postfix_str(f"last {outcome.cell_id} {outcome.status} · {tally.postfix()}")
            bar.update(1)
    return out
