"""Releases: a workspace's results as a versioned, citable, checkable bundle.

- :mod:`~pipeline.release.results`: ``results.json`` (every cell's config, identity, status,
  metrics with what their intervals are over, cost) and its JSON Schema.
- :mod:`~pipeline.release.bundle`: ``cbench release NAME`` (write once, with a manifest of
  digests and a reproduction guide) and ``--check`` (report tampered files).
- :mod:`~pipeline.release.diff`: ``cbench diff A B`` (cells, numbers beyond their interval,
  tiers and ranks).
- :mod:`~pipeline.release.site`: ``cbench site``, static HTML of one or more releases.

Releases read the workspace's files (``reports/``, ``params.resolved.yaml``) and write under
``releases/``; they sit beside the stages, above the report package, and no stage imports them.
"""
