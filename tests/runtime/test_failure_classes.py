"""A failed cell says whether it failed by itself (not retried) or its environment failed it
(retried on the next run): ``pipeline.runtime.cells.failures`` and the store's reading of a
record."""

from __future__ import annotations

import errno

import pytest
import torch

from pipeline.encoders.device import DeviceUnavailableError
from pipeline.runtime.cells.failures import CELL, ENVIRONMENT, CellTimeout, classify
from pipeline.runtime.store import files, folders
from pipeline.train import DivergedError

ENVIRONMENT_ERRORS = [
    DeviceUnavailableError("device = 'cuda': CUDA is not available here"),
    MemoryError(),
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA error: an illegal memory access was encountered"),
    RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 GB; "
                 "out of memory"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EIO, "Input/output error"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    OSError(errno.EMFILE, "Too many open files"),
    OSError(errno.ENFILE, "Too many open files in system"),
    PermissionError(errno.EACCES, "Permission denied", "/store/cells/ab/.cd.tmp"),
    CellTimeout("the cell ran longer than compute.cell_timeout_s = 5 s"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                 "allocate memory: you tried to allocate 17179869184 bytes. Error code 12 "
                 "(Cannot allocate memory)"),  # torch 2.14's message, as the real worker test saw
    RuntimeError("DataLoader worker (pid(s) 4242) exited unexpectedly"),
    RuntimeError("Too many open files. Communication with the workers is no longer possible."),
]
CELL_ERRORS = [
    ValueError("this loss needs batch.labels"),
    RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x16 and 8x4)"),
    KeyError("graph"),
    ZeroDivisionError(),
    DivergedError("loss is nan at epoch 3"),
    FileNotFoundError(errno.ENOENT, "No such file", "weights.pt"),
]


@pytest.mark.parametrize("err", ENVIRONMENT_ERRORS, ids=lambda e: type(e).__name__)
def test_environment_failures(err):
    assert classify(err) == ENVIRONMENT


@pytest.mark.parametrize("err", CELL_ERRORS, ids=lambda e: type(e).__name__)
def test_the_cells_own_failures(err):
    assert classify(err) == CELL


def test_an_error_raised_from_an_environment_failure_is_one():
    """A loss that wraps the allocator's error (``raise ... from``, or raising while handling
    it) failed by its environment; one that merely handled an unrelated error did not."""
    try:
        try:
            raise MemoryError
        except MemoryError as err:
            raise ValueError("the batch did not fit") from err
    except ValueError as wrapped:
        assert classify(wrapped) == ENVIRONMENT
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError:
            raise KeyError("graph")  # noqa: B904 — raised while handling: __context__
    except KeyError as during:
        assert classify(during) == ENVIRONMENT
    try:
        try:
            raise KeyError("graph")
        except KeyError as err:
            raise ValueError("bad option") from err
    except ValueError as own:
        assert classify(own) == CELL


def _failed(folder, kind):
    folder.mkdir(parents=True)
    files.atomic_write_json(folder / "cell.json", {"status": "failed", "failure_class": kind,
                                                     "reason": "OSError: disk full\ntrace"})


def test_an_environment_failure_is_retried_and_a_cells_own_is_not(tmp_path):
    _failed(tmp_path / "env", ENVIRONMENT)
    state = folders.inspect(tmp_path / "env")
    assert state.status == "todo"
    assert state.problem == "retried: an environment failure (OSError: disk full)"
    _failed(tmp_path / "own", CELL)
    assert folders.inspect(tmp_path / "own").status == "failed"
    _failed(tmp_path / "old", "")  # recorded before failures had a class: the cell's own
    assert folders.inspect(tmp_path / "old").status == "failed"
