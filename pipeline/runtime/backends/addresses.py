"""Where the runtime's local servers listen, and which Ray cluster a run uses.

Standard library only, so that a stage whose Dask work runs here (``scheduler.py``) decides so
without importing Ray (an import that costs a stage most of a second);
:mod:`pipeline.runtime.backends.executor` re-exports both names.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config import ComputeConfig

LOOPBACK = "127.0.0.1"  # every local server (Ray's, Dask's) binds here, never another address


def ray_address(compute: ComputeConfig) -> str | None:
    """The Ray cluster to use: ``compute.ray_address``, else ``RAY_ADDRESS``; None: run locally."""
    return compute.ray_address or os.environ.get("RAY_ADDRESS") or None
