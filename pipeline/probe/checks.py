"""Input checks of the frozen-feature protocols: features, labels, their agreement, devices.

Each failure is a ``ValueError`` naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

ArrayLike = np.ndarray | Tensor

_MAX_LISTED = 10


def listed(values: np.ndarray) -> str:
    """At most ten values, then how many there are in all."""
    shown = ", ".join(str(v) for v in values[:_MAX_LISTED].tolist())
    return f"[{shown}{f', ... ({values.size} in all)' if values.size > _MAX_LISTED else ''}]"


def resolve_device(device: str | torch.device | None, *arrays: Any) -> torch.device:
    """``device`` if given, else the device of the first torch tensor among ``arrays``, else CPU."""
    if device is not None:
        try:
            return torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"device = {device!r}: not a torch device ({err}); allowed: 'cpu', "
                             "'cuda', 'cuda:0', a torch.device or None") from err
    for a in arrays:
        if isinstance(a, Tensor):
            return a.device
    return torch.device("cpu")


def features(x: Any, name: str, dtype: torch.dtype, device: torch.device,
             n_cols: int | None = None, cols_of: str = "train_x") -> Tensor:
    """``x`` as a finite ``(n, d)`` tensor of ``dtype`` on ``device`` (n >= 1, d >= 1)."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype = {dtype}: allowed torch.float32 or torch.float64")
    if isinstance(x, Tensor):
        t = x.detach()
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name}.dtype = {arr.dtype}: features must be real numbers")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 2 or t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(f"{name}.shape = {tuple(t.shape)}: expected (n, d) features with "
                         "n >= 1 rows and d >= 1 columns")
    if t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name}.dtype = {t.dtype}: features must be real numbers")
    if n_cols is not None and t.shape[1] != n_cols:
        raise ValueError(f"{name}.shape = {tuple(t.shape)}: expected {n_cols} columns, as many "
                         f"as {cols_of}")
    t = t.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(t.sum(dim=0)).all()):  # one cheap pass; count only on failure
        bad = int((~torch.isfinite(t)).sum())
        what = (f"has {bad} NaN or infinite value(s) out of {t.numel()}" if bad else
                f"has column sums beyond the range of {dtype}")
        raise ValueError(f"{name} {what}: features must be finite")
    return t


def labels(y: Any, name: str, n_rows: int, rows_of: str) -> np.ndarray:
    """``y`` as an ``(n_rows,)`` int64 numpy array (integer ids, any values)."""
    arr = y.detach().cpu().numpy() if isinstance(y, Tensor) else np.asarray(y)
    if arr.shape != (n_rows,):
        raise ValueError(f"{name}.shape = {arr.shape}: expected ({n_rows},), one label per row "
                         f"of {rows_of}")
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            return arr.astype(np.int64)
        raise ValueError(f"{name}.dtype = {arr.dtype}: labels must be integer class ids")
    return arr.astype(np.int64)


def encode_labels(reference: np.ndarray, ref_name: str, other: np.ndarray,
                  other_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(classes, reference ids, other ids): labels mapped to 0..K−1 in sorted order of the ids.

    Every label of ``other`` must occur in ``reference``.
    """
    classes = np.unique(reference)
    missing = np.setdiff1d(np.unique(other), classes)
    if missing.size:
        raise ValueError(f"{other_name} has label(s) {listed(missing)} missing from {ref_name}: "
                         f"every class must have samples in {ref_name}, whose labels are "
                         f"{listed(classes)}")
    return classes, np.searchsorted(classes, reference), np.searchsorted(classes, other)


def probe_inputs(train_x: Any, train_y: Any, test_x: Any, test_y: Any, device: Any,
                 dtype: torch.dtype) -> tuple[torch.device, torch.Tensor, torch.Tensor,
                                              np.ndarray, np.ndarray, np.ndarray]:
    """A probe's checked inputs: (device, train features, test features, classes, train ids,
    test ids), the ids 0..K−1 (:func:`encode_labels`); ValueError on any bad input, and when
    the training labels hold fewer than 2 classes."""
    dev = resolve_device(device, train_x, test_x)
    xtr = features(train_x, "train_x", dtype, dev)
    xte = features(test_x, "test_x", dtype, dev, n_cols=xtr.shape[1])
    ytr_raw = labels(train_y, "train_y", xtr.shape[0], "train_x")
    yte_raw = labels(test_y, "test_y", xte.shape[0], "test_x")
    classes, ytr, yte = encode_labels(ytr_raw, "train_y", yte_raw, "test_y")
    if classes.size < 2:
        raise ValueError(f"train_y has {classes.size} class ({listed(classes)}): the "
                         "probe needs at least 2 classes")
    return dev, xtr, xte, classes, ytr, yte


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} = {value!r}: must be an integer >= 1")
    return int(value)


def positive_float(value: Any, name: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float | np.floating)
            or not np.isfinite(value) or value <= 0):
        raise ValueError(f"{name} = {value!r}: must be a finite number > 0")
    return float(value)


