"""Runtime adapters: the only package that imports ray, dask, mlflow and pyarrow.

Its floors, from the bottom (docs/DESIGN.md, "The runtime's layers"):

- :mod:`.store`: the cell store and its files;
- :mod:`.cells`: one cell's work, with its files;
- :mod:`.backends`: where cells and tasks run (forked workers, Ray, Dask);
- :mod:`.tracking`: MLflow;
- the stages' orchestration, here: :mod:`.paths` and :mod:`.context` (where a stage reads and
  writes), :mod:`.driver` and :mod:`.grid_run` (the train stage's grid against the store),
  :mod:`.memo` (a rerun with nothing to do), :mod:`.warm` (the warm interpreter),
  :mod:`.progress` and :mod:`.suite_plan` (a suite's workspace).
"""
