"""resolve refuses a cluster run whose cell store is on one node's own disk, naming the key.

A cluster run is ``compute.ray_address`` (else ``$RAY_ADDRESS``) set; node-local is the per-user
cache (no ``compute.storage``, no ``$CBENCH_STORE``) or a path under ``$HOME`` or
``$XDG_CACHE_HOME`` — unless ``CBENCH_STORE_SHARED=1`` says it is shared
(pipeline/config/store_path.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import ConfigError, from_mapping
from pipeline.runtime.store.folders import default_store

ENV = ("CBENCH_STORE", "CBENCH_STORE_SHARED", "RAY_ADDRESS", "XDG_CACHE_HOME")


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A home of its own, and none of the settings the rule reads."""
    for key in ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def _params(tiny_params, ray_address=None, storage=None):
    tiny_params["compute"].update(ray_address=ray_address, storage=storage)
    return from_mapping(tiny_params)


def _refused(tiny_params, match, **compute):
    with pytest.raises(ConfigError, match=match) as err:
        _params(tiny_params, **compute)
    return str(err.value)


def test_a_cluster_run_with_the_per_user_cache_is_refused(env, tiny_params, tmp_path):
    message = _refused(tiny_params, r"^compute.storage = None: a cluster run \(compute."
                       r"ray_address = 'auto'\)", ray_address="auto")
    cache = tmp_path / "home" / ".cache" / "contrastive-bench"
    assert f"the store would be {cache}, the per-user cache ($CBENCH_STORE is unset)" in message
    assert "CBENCH_STORE_SHARED=1" in message and "s3://" in message  # what to do instead


def test_a_local_run_keeps_the_per_user_cache(env, tiny_params, tmp_path):
    _params(tiny_params)  # no error
    assert default_store() == tmp_path / "home" / ".cache" / "contrastive-bench"


def test_ray_address_from_the_environment_is_a_cluster_run_too(env, tiny_params):
    env.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    _refused(tiny_params, r"a cluster run \(\$RAY_ADDRESS = '127.0.0.1:6379'\)")


@pytest.mark.parametrize("where", ["home", "xdg"])
def test_a_store_under_the_home_or_the_cache_folder_is_refused(env, tiny_params, tmp_path, where):
    xdg = tmp_path / "xdg"
    env.setenv("XDG_CACHE_HOME", str(xdg))
    inside = tmp_path / "home" / "store" if where == "home" else xdg / "store"
    env.setenv("CBENCH_STORE", str(inside))
    folder = "the home folder $HOME" if where == "home" else "the cache folder $XDG_CACHE_HOME"
    _refused(tiny_params, rf"\$CBENCH_STORE = {inside} is under {folder.replace('$', '[$]')}",
             ray_address="auto")
    _refused(tiny_params, rf"compute.storage = 'file://{inside}'.* it = {inside} is under",
             ray_address="auto", storage=f"file://{inside}")
    env.setenv("CBENCH_STORE_SHARED", "1")  # an NFS home: the user says it is shared
    _params(tiny_params, ray_address="auto")
    _params(tiny_params, ray_address="auto", storage=f"file://{inside}")


@pytest.mark.parametrize("setting", [{"env": "/mnt/cbench"}, {"storage": "file:///mnt/cbench"},
                                     {"storage": "s3://bucket/prefix"}])
def test_a_shared_volume_or_an_object_store_is_accepted(env, tiny_params, setting):
    if "env" in setting:
        env.setenv("CBENCH_STORE", setting["env"])
        assert default_store() == Path(setting["env"])
    _params(tiny_params, ray_address="auto", storage=setting.get("storage"))
