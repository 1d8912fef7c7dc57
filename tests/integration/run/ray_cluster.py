"""A real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``) for the dispatch and bisect tests.

A head that runs nothing (no cores) and two worker nodes told apart by custom resources: both offer ``probe``,
one ``tag_a``, the other ``tag_b``. Own temp dir, 127.0.0.1, no auth, no usage stats; every node is stopped at
the end and the test fails if one of its processes is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autotest.own_time import OwnClock
from autotest.run.proctable import descendants
from tests.integration.run.test_ray_job import free_port

NODE_MEMORY = 80 * 1024 * 1024  # object store per node: these tests move no data


@dataclass
class LocalCluster:
    cluster: Any
    temp_dir: str
    #: custom tag -> the Ray node object that offers it
    nodes: dict[str, Any]

    @property
    def address(self) -> str:
        return self.cluster.address

    def tag_of(self, node_id: str) -> str:
        return next(tag for tag, node in self.nodes.items() if node.node_id == node_id)

    def remove(self, tag: str) -> None:
        self.cluster.remove_node(self.nodes.pop(tag))


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _pids_naming(marker: str) -> set[int]:
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes() and _alive(int(proc.name)):
                    found.add(int(proc.name))
            except OSError:
                continue
    return found | {child for pid in found for child in descendants(pid)}


def leftovers(marker: str) -> list[str]:
    """Command lines of live processes naming ``marker`` (a test's tmp_path), this one aside."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and _alive(int(proc.name)):
                found.append(cmdline)
    return found


@contextmanager
def ray_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        pytest.skip("ray is not installed: pip install 'rl-autotest[workloads]'")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    temp_dir = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths have a limit
    # Cluster writes the head's address to $RAY_TMPDIR/ray/ray_current_cluster: ours, not the machine's /tmp/ray
    monkeypatch.setenv("RAY_TMPDIR", temp_dir)
    # Ray resolves 127.0.0.1 to the machine's own address for the driver (services.resolve_ip_for_localhost),
    # where no node of a loopback cluster listens, and ray.init then waits forever for a raylet. Ray's own
    # switch for one-machine clusters keeps every address on loopback: the variable for the processes the
    # nodes start, the constant for this already-imported driver.
    from ray._private import ray_constants

    monkeypatch.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    os.makedirs(os.path.join(temp_dir, "ray"))
    before = set(descendants(os.getpid()))
    t0 = time.monotonic()
    cluster = Cluster(shutdown_at_exit=False)
    try:
        cluster.add_node(num_cpus=0, node_ip_address="127.0.0.1", temp_dir=temp_dir, include_dashboard=False,
                         dashboard_port=free_port(), object_store_memory=NODE_MEMORY)
        nodes = {tag: cluster.add_node(num_cpus=1, resources={"probe": 1, tag: 1}, node_ip_address="127.0.0.1",
                                       temp_dir=temp_dir, object_store_memory=NODE_MEMORY)
                 for tag in ("tag_a", "tag_b")}
        cluster.wait_for_nodes()
        print(f"\nray cluster of 3 nodes up in {time.monotonic() - t0:.1f} s at {cluster.address}")
        yield LocalCluster(cluster, temp_dir, nodes)
    finally:
        cluster.shutdown()
        def still_there() -> list[int]:
            return sorted({p for p in descendants(os.getpid()) if p not in before and _alive(p)}
                          | {p for p in _pids_naming(temp_dir)})

        # 30 s of the leftovers' own time (autotest/own_time.py): their exit, however busy the machine
        clock = OwnClock(0, pids=still_there)
        while (left := still_there()) and clock.elapsed_s() < 30:
            time.sleep(0.5)
        for pid in left:  # a node that failed to start is not in the cluster's lists: ours by its temp dir
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"processes of the test's Ray cluster still alive after shutdown: {left}"
