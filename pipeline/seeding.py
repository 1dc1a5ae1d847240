"""The one place that turns (seed, cell_id, stream) into random generators (STYLE.md §5).

Every random draw in a cell comes from a generator made here, so a cell gives the same result on
any worker, in any order, alone or inside a grid.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import numpy as np
import torch


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, stable across processes and Python versions."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def torch_generator(*parts: object) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(*parts))


def numpy_generator(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))


@contextlib.contextmanager
def seeded_init(*parts: object) -> Iterator[None]:
    """Build modules whose constructors draw from torch's global RNG, without touching it.

    ``torch.nn`` layers initialise from the global generator; this forks it, seeds the fork from
    ``parts`` and restores the caller's state afterwards.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(*parts))
        yield
