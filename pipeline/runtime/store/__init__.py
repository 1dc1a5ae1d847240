"""The cell store: where finished cells live, shared by every workspace of the project.

- :mod:`.folders`: a cell's folder, addressed by its config and version; inspected, published;
- :mod:`.layout`: the names of the files in a cell's folder;
- :mod:`.files`: atomic writes, local or object-store paths, the Parquet tables and their schemas;
- :mod:`.claims`: leases on cells, so that two drivers never train the same cell at once;
- :mod:`.weights`: a cell's trained tensors, without the frozen backbone it started from.
"""
