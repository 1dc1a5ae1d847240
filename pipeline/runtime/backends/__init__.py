"""Where cells and tasks run: forked workers, Ray, and the Dask scheduler of the later stages.

- :mod:`.cell_workers`: the train stage's cells on processes forked from the stage, else on Ray;
- :mod:`.executor`: Ray, one task per cell;
- :mod:`.following`: the progress over cells' outcomes, whichever backend runs them;
- :mod:`.addresses`: where the local servers listen, and which Ray cluster a run uses;
- :mod:`.scheduler`: the Dask scheduler of the stats, search, bounds and probe stages;
- :mod:`.dask_ops`, :mod:`.probe_ops`: those stages' Dask graphs;
- :mod:`.capacity`: a model of a grid's wall time on a cluster.
"""
