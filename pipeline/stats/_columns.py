"""Column handling shared by the normality tests: axis moves, blocking, sorting, moments.

Internally every test sees a (m, N) float64 torch tensor, one sample per row, contiguous, so
sorting and reductions run along the fast axis. Blocks of rows bound the float64 working set.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

# Bytes of one float64 (rows, N) work array; a block keeps three of them alive.
BLOCK_BYTES = 8 * 2**20


def sample_rows(x: np.ndarray, axis: int, name: str = "x") -> tuple[np.ndarray, tuple[int, ...]]:
    """View `x` with `axis` moved last and flattened to (m, N); also return the result shape.

    A 2-D (N, d) matrix with axis=0 becomes a (d, N) strided view without a copy.
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name}.dtype = {arr.dtype}: expected a real numeric array")
    if arr.ndim == 0:
        raise ValueError(f"{name}.shape = (): expected at least one dimension")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(
            f"axis = {axis}: must be in [{-arr.ndim}, {arr.ndim - 1}] "
            f"for {name}.shape = {arr.shape}"
        )
    moved = np.moveaxis(arr, axis, -1)
    out_shape = moved.shape[:-1]
    return moved.reshape(-1, moved.shape[-1]), out_shape


def row_blocks(m: int, n: int, block_bytes: int | None = None) -> Iterator[slice]:
    """Slices over m rows of length n, each block about `block_bytes` of float64."""
    step = max(1, (block_bytes or BLOCK_BYTES) // max(1, 8 * n))
    for start in range(0, m, step):
        yield slice(start, min(m, start + step))


def _private_rows(rows: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of (m, N) rows in float32 (float16/32 input) or float64.

    The (d, N) view of an (N, d) matrix is a transpose; torch's tiled copy does it about 5×
    faster than NumPy's strided gather. The copy is ours, so it can be sorted in place.
    """
    work = np.float32 if rows.dtype in (np.float16, np.float32) else np.float64
    src = rows.astype(work, copy=False)
    if src.flags.c_contiguous or min(src.strides, default=0) < 0:
        return np.array(src, dtype=work, order="C", copy=True)
    with warnings.catch_warnings():  # a read-only source (e.g. Parquet memory) is only read here
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(src).contiguous().numpy()


def _sort_rows_(own: np.ndarray) -> None:
    """Sort each row of a C-contiguous (m, N) array in place, on torch.get_num_threads() threads.

    NumPy's SIMD sort is ~10x faster than torch.sort on CPU but single-threaded; it releases
    the GIL, so chunks of rows sort in parallel in a thread pool sized like torch's.
    """
    workers = min(torch.get_num_threads(), own.shape[0])
    if workers <= 1:
        own.sort(axis=-1)
        return
    bounds = np.linspace(0, own.shape[0], workers + 1).astype(int)
    with ThreadPoolExecutor(workers) as pool:
        jobs = [
            pool.submit(own[a:b].sort, axis=-1) for a, b in zip(bounds, bounds[1:], strict=False)
        ]
        for job in jobs:
            job.result()


def iter_blocks(
    rows: np.ndarray, *, sort: bool
) -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
    """Yield (rows slice, values, scratch) over blocks of `rows`, each row sorted if asked.

    values: (b, N) float64 copy of the block; scratch: (2, b, N) float64 work space. Both are
    views of buffers reused for every block (no fresh page faults per block), so they are valid
    only until the next iteration. Float32 rows are sorted in float32 (the cast to float64 is
    monotonic, so the order is the same) and promoted afterwards. Peak memory: one private copy
    of `rows` plus three float64 blocks of about BLOCK_BYTES.
    """
    own = _private_rows(rows)
    if sort:
        _sort_rows_(own)
    m, n = own.shape
    step = next(iter(row_blocks(m, n)), slice(0, 0)).stop
    values = torch.empty((step, n), dtype=torch.float64)
    scratch = torch.empty((2, step, n), dtype=torch.float64)
    for sl in row_blocks(m, n):
        b = sl.stop - sl.start
        values[:b].copy_(torch.from_numpy(own[sl]))
        yield sl, values[:b], scratch[:, :b]


@dataclass(frozen=True)
class RowMoments:
    """Per-row sample moments of a (b, N) block; arrays of shape (b,), float64.

    m2, m3, m4 are central moments with divisor N (biased, as in scipy.stats.skew/kurtosis).
    """

    n: int
    mean: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m4: np.ndarray


def centre_and_moments(t: torch.Tensor, scratch: torch.Tensor) -> RowMoments:
    """Subtract each row's mean from the (b, N) float64 `t` in place; return the row moments.

    Two-pass: centre first, then the central powers of the centred rows. The centring is
    corrected (Chan, Golub & LeVeque 1983): even a correctly rounded mean is up to half an ulp
    of |mean| off, which for a column far from zero (1e6 + 1e-3·N(0, 1): 6e-8 of its std) shifts
    the skewness and A² at first order; the differences x − mean are exact there (Sterbenz), so
    their own mean, subtracted in a second pass, leaves a residual of the order of eps·std.
    scratch: (2, b, N) float64 work space.
    """
    n = t.shape[1]
    mean = t.mean(dim=1)
    t.sub_(mean.unsqueeze(1))
    residual = t.mean(dim=1)
    t.sub_(residual.unsqueeze(1))
    mean += residual
    d2 = torch.mul(t, t, out=scratch[0])
    m2 = d2.sum(dim=1) / n
    m3 = torch.mul(d2, t, out=scratch[1]).sum(dim=1) / n
    m4 = torch.linalg.vector_norm(d2, dim=1).square_() / n
    return RowMoments(n, mean.numpy(), m2.numpy(), m3.numpy(), m4.numpy())
