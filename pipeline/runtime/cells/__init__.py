"""One cell's work, with its files: what a worker runs for one cell, in any stage.

- :mod:`.one_cell`: train a cell, export its held-out embeddings, write ``cell.json`` last;
- :mod:`.failures`: why a cell failed (its own computation or its environment) and what then;
- :mod:`.cost`: what a cell cost (time, memory, device, energy where measured);
- :mod:`.evaluate`: a cell's encoders read back from its folder;
- :mod:`.analyses`: one cell's work in the stats, search and bounds stages;
- :mod:`.tables`: those stages' tables, from the per-cell results;
- :mod:`.task`: the wrapper that makes a raised error one cell's `Failed` value, in a Dask graph;
- :mod:`.verify`: ``cbench verify``, retrain done cells and check that they reproduce.
"""
