"""Device choice and mixed precision: CUDA when present (bf16 autocast optional), else CPU."""

from __future__ import annotations

import contextlib
from typing import Any

import torch


def pick_device(prefer: str = "auto") -> torch.device:
    """``'auto'``: cuda if available else cpu; ``'cpu'``; ``'cuda'`` / ``'cuda:N'`` (must exist)."""
    if prefer == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if prefer == "cpu":
        return torch.device("cpu")
    if prefer.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device = {prefer!r}: CUDA is not available here; allowed: 'auto', 'cpu'")
        return torch.device(prefer)
    raise ValueError(f"device = {prefer!r}: allowed: 'auto', 'cpu', 'cuda', 'cuda:N'")


def autocast_context(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast('cuda', bfloat16)`` when ``bf16`` and on CUDA; otherwise a no-op context.

    On CPU bf16 autocast is slower than float32 for these models, so it is never used there.
    """
    if bf16 and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
