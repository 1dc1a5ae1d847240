"""Whether a file or folder that the params name can be read (stdlib only).

One predicate for the check of the files a params file names (:mod:`pipeline.config.files`,
plugins in :mod:`pipeline.plugins`) and for ``resolve``'s memo, which re-checks the same files
before it skips the stage, without importing the validation (STYLE.md §18).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["file", "folder"]


def unreadable(path: Path, kind: Kind) -> str:
    """'' when ``path`` is a ``kind`` this process may read (a folder: list and enter); else what
    is wrong, worded to follow the thing's name ("MNIST folder not found")."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "not found"
    except PermissionError:
        return "cannot be reached (a folder above it may not be entered)"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if kind == "file" and stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if kind == "folder" and not stat.S_ISDIR(mode):
        return "is not a folder"
    if not os.access(path, os.R_OK | (os.X_OK if kind == "folder" else 0)):
        return "is not readable (permission denied)"
    return ""
