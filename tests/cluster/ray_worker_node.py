"""One Ray worker node on 127.0.0.1 joining a head, for the simulated cluster of the tests.

    python tests/cluster/ray_worker_node.py <gcs address> <num_cpus> <temp dir> <ports...>

What ``ray start --address=<head>`` starts (a raylet, its object store and agents, through the
same ``ray._private.node.Node``), bound to 127.0.0.1: the CLI cannot do that on one machine
(with Ray's single-machine switch it refuses to join a head; without it, it swaps 127.0.0.1 for
the machine's external address). Runs until SIGTERM (then stops its node) or SIGKILL (its
process group: the node is lost, as a pod that goes away).
"""

from __future__ import annotations

import signal
import sys
import time

import ray._private.node
import ray._private.parameter


def main(argv: list[str]) -> int:
    gcs, cpus, temp_dir, agent, metrics, runtime_env = argv
    params = ray._private.parameter.RayParams(
        gcs_address=gcs, node_ip_address="127.0.0.1", num_cpus=int(cpus), num_gpus=0,
        object_store_memory=150 * 1024 * 1024, temp_dir=temp_dir, node_manager_port=0,
        min_worker_port=0, max_worker_port=0, include_log_monitor=False,
        dashboard_agent_listen_port=int(agent), metrics_export_port=int(metrics),
        runtime_env_agent_port=int(runtime_env))
    node = ray._private.node.Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # exit: atexit stops the node
    print(f"worker node {node.node_id} up on {node.node_ip_address}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
