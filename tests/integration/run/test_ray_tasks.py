"""The Ray task dispatch on a real three-node cluster on this machine (no mocks): placement by custom resources,
a node removed mid-run (its call re-runs on the other node, exactly once), an interrupt that leaves nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.interrupts import Interrupted, clear_stop, request_stop
from autotest.run.ray_tasks import RayCall, RayPlacement, attempts, run_on_cluster
from tests import waits
from tests.integration.run.ray_cluster import LocalCluster, leftovers, ray_cluster

pytestmark = pytest.mark.slow
WAIT_S = 120.0  # a task on 2 shared cores: seconds idle, a minute under load


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    with ray_cluster(monkeypatch) as made:
        yield made


def _pid(folder: Path) -> int:
    return os.getpid()


def _first_attempt_waits(folder: Path) -> int:
    """The first attempt waits to be lost with its node; the re-run answers at once."""
    if len(attempts(folder)) == 1:
        time.sleep(300)
    return len(attempts(folder))


def _child_until_cancelled(folder: Path) -> str:
    """A run with a process of its own, stopped the way the pipeline stops its process group."""
    # the folder rides in the child's command line (as a run's work dir does) so the test can find it
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(folder)])
    try:
        child.wait()
    finally:
        child.terminate()
        child.wait()
    return "finished"


def _lost(i: int, why: str) -> str:
    return f"lost {i}: {why}"


def _wait_for(check, what: str) -> None:
    # the tasks run in the cluster's workers, not a tree of ours: stretched by the load per core (tests/waits.py)
    waits.until(check, WAIT_S, what=f"timed out waiting for {what}")


def test_each_call_lands_on_a_node_with_its_resources(cluster: LocalCluster, tmp_path: Path) -> None:
    calls = [RayCall(f"c{i}", tmp_path / f"c{i}", lambda f=tmp_path / f"c{i}": _pid(f)) for i in range(3)]
    pids = run_on_cluster(calls, RayPlacement(cluster.address, {"tag_b": 1}), lost=_lost)
    assert len(pids) == 3 and os.getpid() not in pids  # ran in the cluster's workers, not here
    assert {cluster.tag_of(attempts(tmp_path / f"c{i}")[0]["node_id"]) for i in range(3)} == {"tag_b"}


def test_resources_no_node_offers_are_one_line(cluster: LocalCluster, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        run_on_cluster([RayCall("c", tmp_path, lambda: 1)], RayPlacement(cluster.address, {"tag_c": 1}), lost=_lost)
    assert str(caught.value).startswith(f"--ray-tasks {cluster.address}: no node offers CPU=1, tag_c=1 "
                                        "(the nodes offer: ")
    assert "start nodes with `ray start --resources" in str(caught.value) and "\n" not in str(caught.value)


def test_a_lost_node_reruns_its_call_elsewhere_exactly_once(cluster: LocalCluster, tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    remover = threading.Thread(target=lambda: (_wait_for(lambda: attempts(folder), "the first attempt"),
                                               cluster.remove(cluster.tag_of(attempts(folder)[0]["node_id"]))))
    remover.start()
    try:
        result = run_on_cluster([RayCall("probe", folder, lambda: _first_attempt_waits(folder))],
                                RayPlacement(cluster.address, {"probe": 1}), lost=_lost)
    finally:
        remover.join()
    trail = attempts(folder)
    assert result == [2] and len(trail) == 2  # the re-run answered, and nothing ran a third time
    assert trail[0]["node_id"] != trail[1]["node_id"]
    assert set(cluster.nodes) == {cluster.tag_of(trail[1]["node_id"])}  # the node that is left


def test_an_interrupt_cancels_every_task_and_leaves_nothing_running(cluster: LocalCluster, tmp_path: Path) -> None:
    folders = [tmp_path / f"c{i}" for i in range(3)]  # two run (one core a node), one waits for a core
    calls = [RayCall(f"c{i}", f, lambda f=f: _child_until_cancelled(f)) for i, f in enumerate(folders)]
    stopper = threading.Thread(target=lambda: (
        _wait_for(lambda: sum(1 for f in folders if leftovers(str(f))) >= 2, "two running children"),
        request_stop("test: Ctrl-C")))
    stopper.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            run_on_cluster(calls, RayPlacement(cluster.address, {"probe": 1}), lost=_lost)
    finally:
        stopper.join()
        clear_stop()
    print(f"stopped in {time.monotonic() - t0:.1f} s")
    assert leftovers(str(tmp_path)) == []
    assert sum(1 for f in folders if attempts(f)) == 2  # the queued one never started
