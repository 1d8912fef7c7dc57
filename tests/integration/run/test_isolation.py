"""A run's Ray cleanup stops its own cluster only: processes named by its GCS port or temp dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autotest.run.isolation import cluster_pids, free_ports
from tests.helpers import ROOT
from tests import waits


def _daemon(port: int, *extra: str) -> subprocess.Popen:
    """A detached stand-in for a Ray daemon (gcs_server, raylet, ...): its command line names the cluster."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--gcs-address=127.0.0.1:{port}",
                             *extra], start_new_session=True)


def test_stop_ray_stops_its_cluster_and_spares_the_neighbours(tmp_path: Path) -> None:
    mine_port, other_port = free_ports(2)
    temp_dir = Path("/tmp") / f"rlat-ray-test{os.getpid()}"
    (temp_dir / "session_latest").mkdir(parents=True, exist_ok=True)
    mine = _daemon(mine_port)
    worker = _daemon(0, f"--session-dir={temp_dir}/session_latest")  # found by its temp dir
    other = _daemon(other_port)
    try:
        time.sleep(0.3)
        assert {mine.pid, worker.pid} <= set(cluster_pids(mine_port, str(temp_dir)))
        assert other.pid not in cluster_pids(mine_port, str(temp_dir))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = waits.run([sys.executable, "-m", "autotest.run.isolation", "stop-ray", "--gcs-port",
                          str(mine_port), "--temp-dir", str(temp_dir)], env=env, capture_output=True,
                         text=True, limit_s=60, check=True)
        assert done.stdout.startswith(f"stopped 2 process(es) of the Ray cluster on port {mine_port}: ")
        assert waits.wait(mine, 10) == -signal.SIGTERM and waits.wait(worker, 10) == -signal.SIGTERM
        assert other.poll() is None and not temp_dir.exists()
    finally:
        for proc in (mine, worker, other):
            proc.kill()
            proc.wait()
