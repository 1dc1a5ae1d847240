"""Every server a local run starts listens on 127.0.0.1 only (no traffic to other addresses)."""

from __future__ import annotations

import ipaddress

import psutil
import pytest
import ray

from pipeline.config import from_mapping
from pipeline.runtime.backends.executor import init_ray
from pipeline.runtime.backends.scheduler import scheduler

pytestmark = pytest.mark.ray


def _listening_addresses() -> set[str]:
    out = set()
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid and _is_ours(conn.pid):
            out.add(conn.laddr.ip)
    return out


def _is_ours(pid: int) -> bool:
    try:
        name = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
    return any(key in name for key in ("ray", "raylet", "gcs_server", "dask", "distributed",
                                       "multiprocessing"))


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    if addr.version == 6 and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def test_local_ray_and_dask_bind_loopback_only(tiny_params, monkeypatch):
    monkeypatch.setenv("CBENCH_DASK_CLUSTER", "always")  # the cluster at once, not when it pays
    compute = from_mapping(tiny_params).compute
    assert compute.ray_address is None
    init_ray(compute)
    try:
        assert ray.get(ray.remote(lambda: 1).remote()) == 1
        with scheduler(compute, n_workers=2):  # one worker runs in-process: no cluster
            addresses = _listening_addresses()
    finally:
        ray.shutdown()
    assert addresses, "found no listening Ray/Dask sockets to check"
    assert all(_loopback(ip) for ip in addresses), addresses
