"""The plot worker with real processes: the pictures are byte for byte those drawn alone, the worker draws
its share, a dead worker costs no picture, and a worker never outlives the harness that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.report import plot_worker
from autotest.report.plots import Drawer, MetricPlot, metric_plots
from tests import waits
from tests.helpers import FROZEN_TINY_GRPO_BASELINE, ROOT, tiny_grpo_tracker


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(plot_worker.ENV, "1")
    monkeypatch.setattr(plot_worker, "_worker", None)
    started = plot_worker.prepare()
    assert started is not None and started.wait_ready(120), "the plot worker never became ready"
    yield started
    started.stop()


def _plots(tmp_path: Path) -> list[MetricPlot]:
    comparison = compare(load_baseline(FROZEN_TINY_GRPO_BASELINE),
                         read_trace(tiny_grpo_tracker(tmp_path / "tracker.jsonl")))
    return metric_plots(comparison.verdict, comparison.golden, comparison.current)


def _alone(plots: list[MetricPlot], folder: Path) -> dict[str, bytes]:
    folder.mkdir()
    drawer = Drawer()
    for plot in plots:
        drawer.draw(plot, folder)
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_shared_plots_are_byte_for_byte_those_drawn_alone_and_the_worker_draws_its_share(tmp_path, worker):
    plots = _plots(tmp_path)
    alone = _alone(plots, tmp_path / "alone")
    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    by_worker = worker.share(plots, shared_dir, Drawer())
    assert by_worker, "the worker, ready before the job, drew none of the 7 plots"
    assert {p.name: p.read_bytes() for p in shared_dir.iterdir() if p.suffix == ".png"} == alone
    # the same worker serves the next report
    again = tmp_path / "again"
    again.mkdir()
    plot_worker.draw_shared(plots, again)
    assert {p.name: p.read_bytes() for p in again.iterdir() if p.suffix == ".png"} == alone
    assert plot_worker.prepare() is worker


def test_a_dead_worker_costs_no_picture_and_is_replaced(tmp_path, worker):
    plots = _plots(tmp_path)
    alone = _alone(plots, tmp_path / "alone")
    worker.proc.kill()
    worker.proc.wait()
    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    assert worker.share(plots, shared_dir, Drawer()) == set()
    assert {p.name: p.read_bytes() for p in shared_dir.iterdir() if p.suffix == ".png"} == alone
    replacement = plot_worker.prepare()
    assert replacement is not None and replacement is not worker and replacement.alive()
    replacement.stop()


def test_a_killed_harness_leaves_no_plot_worker(tmp_path):
    harness = subprocess.Popen(
        [sys.executable, "-c", "from autotest.report import plot_worker; import time; "
         "w = plot_worker.prepare(); print(w.proc.pid, flush=True); time.sleep(600)"],
        cwd=ROOT, env={**os.environ, plot_worker.ENV: "1"}, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(harness.stdout.readline())
        os.kill(pid, 0)  # the worker runs
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        waits.until(lambda: not _running(pid), 30, pid=pid, what="the plot worker outlived its SIGKILLed harness")
    finally:
        harness.kill()
        harness.wait()
        harness.stdout.close()


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"  # an unreaped zombie has exited


def test_reports_published_side_by_side_share_one_worker_in_turn(tmp_path, worker):
    # replicates publish from threads of one process: one shares the worker, the others draw alone meanwhile
    plots = _plots(tmp_path)
    alone = _alone(plots, tmp_path / "alone")
    folders = [tmp_path / f"replicate-{i}" for i in range(3)]
    for folder in folders:
        folder.mkdir()
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda folder: plot_worker.draw_shared(plots, folder), folders))
    for folder in folders:
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == alone, folder
    assert plot_worker.prepare() is worker and worker.alive()
