"""A cell's weights: what it trained, without the frozen pretrained backbone it started from.

A CLIP/DINO cell with ``freeze: true`` trains only its head; its tower is the local weights file
named in ``arch_options``. ``model.safetensors`` then holds the trained tensors alone, and its
metadata records the frozen prefixes and the SHA-256 of the backbone's weights file. Loading
rebuilds the encoder from that file (as training did), checks the file is the one the cell was
trained on, and loads the rest; a ViT-B/32 cell is then its head and embeddings (a few MB), not
350 MB. Other encoders keep every tensor, buffers (batch-norm statistics) included.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.torch import load, save
from torch import nn

from pipeline.encoders.pretrained import PretrainedEncoder
from pipeline.grid import Cell
from pipeline.runtime.store import files


def frozen_prefixes(model: nn.Module) -> list[str]:
    """State-dict prefixes of the frozen pretrained towers inside ``model``."""
    return [f"{name}.backbone." if name else "backbone." for name, m in model.named_modules()
            if isinstance(m, PretrainedEncoder) and m.freeze]


@functools.cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return files.file_sha256(path)


def backbone_sha256(cell: Cell) -> str:
    """SHA-256 of the cell's pretrained weights file (hashed once per file version)."""
    path = Path(str(cell.arch_options["weights"])).expanduser()
    info = os.stat(path)
    return _sha256(str(path.resolve()), info.st_size, info.st_mtime_ns)


def to_bytes(model: nn.Module, cell: Cell) -> bytes:
    """``model.safetensors``: the tensors the cell trained (all but frozen towers)."""
    frozen = frozen_prefixes(model)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()
               if not k.startswith(tuple(frozen))}
    meta = {"cell_id": cell.cell_id, "frozen": json.dumps(frozen)}
    if frozen:
        meta["backbone_sha256"] = backbone_sha256(cell)
    return save(tensors, metadata=meta)


def metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors blob (its JSON header)."""
    (size,) = struct.unpack("<Q", data[:8])
    return dict(json.loads(data[8:8 + size]).get("__metadata__") or {})


def load_into(model: nn.Module, data: bytes, cell: Cell) -> None:
    """Load a cell's ``model.safetensors`` into ``model``, built as training built it.

    ValueError when the frozen tower's weights file is not the one the cell was trained on, or
    when tensors other than a frozen tower's are missing.
    """
    meta: Mapping[str, Any] = metadata(data)
    frozen = json.loads(meta.get("frozen", "[]"))
    if frozen:
        recorded, now = meta.get("backbone_sha256", ""), backbone_sha256(cell)
        if recorded != now:
            weights = cell.arch_options["weights"]
            raise ValueError(f"arch_options.{cell.arch}.weights = {weights!r}: "
                             f"SHA-256 {now[:12]}…, but cell {cell.cell_id} was trained on "
                             f"{recorded[:12]}…: the pretrained weights changed")
    missing, unexpected = model.load_state_dict(load(data), strict=False)
    bad = [k for k in missing if not k.startswith(tuple(frozen))]
    if bad or unexpected:
        raise ValueError(f"cell {cell.cell_id}: model.safetensors does not fit the encoder "
                         f"(missing {bad[:5]}, unexpected {list(unexpected)[:5]})")
