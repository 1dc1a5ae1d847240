"""Where the cell store is, and whether every node of a cluster can reach it.

The store is ``compute.storage`` when set (a ``pyarrow.fs`` URI), else ``$CBENCH_STORE``, else
the per-user cache ``$XDG_CACHE_HOME/contrastive-bench`` (``~/.cache/contrastive-bench``).
:mod:`pipeline.runtime.store.folders` opens it; this module only names it (stdlib only), so that the
params rules can check it before any work.

A store is *node-local* when a cluster's other nodes would not see the files the driver sees
there: the per-user cache (neither setting given), or a path under ``$HOME`` or
``$XDG_CACHE_HOME`` — a container's home or a machine's own disk on every cluster this project
ships configs for. A path elsewhere (``/mnt/cbench/store``, ``file:///shared/cells``) or an
object store URI (``s3://…``) is taken to be shared. ``CBENCH_STORE_SHARED=1`` says that a path
under the home is shared too (an NFS home on an HPC cluster).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STORE_ENV = "CBENCH_STORE"
SHARED_ENV = "CBENCH_STORE_SHARED"


def default_store(env: Mapping[str, str] = os.environ) -> Path:
    """``$CBENCH_STORE``, else ``$XDG_CACHE_HOME/contrastive-bench`` (``~/.cache/...``)."""
    if env.get(STORE_ENV):
        return Path(env[STORE_ENV]).expanduser().resolve()
    return _cache(env) / "contrastive-bench"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home()).expanduser().resolve()


def _cache(env: Mapping[str, str]) -> Path:
    cache = env.get("XDG_CACHE_HOME") or str(_home(env) / ".cache")
    return Path(cache).expanduser().resolve()


def node_local(storage: str | None, env: Mapping[str, str] = os.environ) -> str:
    """'' when the store of ``storage`` (``compute.storage``) and ``env`` is shared; else the
    store's path and why it is on one node's own disk."""
    if storage and not storage.startswith("file://"):
        return ""  # an object store: every node reaches it by its URI
    if storage:
        path, named = Path(storage.removeprefix("file://")).expanduser().resolve(), "it"
    elif env.get(STORE_ENV):
        path, named = default_store(env), f"${STORE_ENV}"
    else:
        return (f"the store would be {default_store(env)}, the per-user cache (${STORE_ENV} is "
                "unset)")
    if env.get(SHARED_ENV) == "1":
        return ""
    for root, what in ((_cache(env), "the cache folder $XDG_CACHE_HOME"),
                       (_home(env), "the home folder $HOME")):
        if path == root or root in path.parents:
            return f"{named} = {path} is under {what} ({root})"
    return ""
