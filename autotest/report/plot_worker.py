"""A report's plots, drawn by the harness and, where a core is idle, by a second process at the same time.

Drawing is matplotlib's text and tick layout, one thread's work: with a core idle, two processes draw a
report's plots in about half the time. The worker is started ahead (:func:`prepare`: while a run trains, or
while ``compare`` reads its logs) so its matplotlib import is paid there, and then serves every report of the
process: it draws from the last plot down while the harness draws from the first up, the harness claiming
each plot before it draws it, until they meet. Its orders come on stdin and it exits when stdin closes, so it
never outlives the harness (a SIGKILLed harness closes it too). A worker that died, failed a plot or is slow
to answer costs time, never a picture: the harness draws whatever the worker did not.

``RL_AUTOTEST_PLOT_WORKER``: ``0`` never start one, ``1`` always; unset, only when a core is idle (the
1-minute load average at least one below the usable cores): on a busy machine a second process only adds CPU.

    python -m autotest.report.plot_worker      (started by the harness; not a command for people)
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotest.files import make_folder
from autotest.judge.model import Verdict
from autotest.judge.trace import Trace
from autotest.report.plots import Drawer, MetricPlot, metric_plots

ENV = "RL_AUTOTEST_PLOT_WORKER"
#: how long the harness waits for the worker to finish the plots it started once its own are done
FINISH_WAIT_S = 30.0
_HEADER = struct.Struct(">I")

_worker: PlotWorker | None = None
_starting = threading.Lock()
#: one report at a time shares the worker; replicates publishing side by side (threads) draw alone meanwhile
_sharing = threading.Lock()


def prepare() -> PlotWorker | None:
    """Start the worker now when it will be used (its matplotlib import then overlaps what comes next); the
    running worker, or None where it is not wanted."""
    global _worker
    with _starting:
        if _worker is None or not _worker.alive():
            _worker = PlotWorker.start() if wanted() else None
        return _worker


def wanted(environ: dict[str, str] | None = None, load: float | None = None, cores: int | None = None) -> bool:
    """Whether a plot worker pays for itself here: forced by ``RL_AUTOTEST_PLOT_WORKER``, else a core is idle."""
    setting = (os.environ if environ is None else environ).get(ENV, "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float(cores)
    return cores >= 2 and load <= cores - 1


def plot_checks(verdict: Verdict, golden: Trace, current: Trace, out_dir: Path,
                replicates: Sequence[tuple[str, Trace]] = ()) -> dict[str, str]:
    """Write plots/<metric>.png for every metric check; returns metric -> path relative to out_dir.

    ``replicates``: (label, trace) of each replicate when ``current`` is their mean. A plot worker, when one
    runs or a core is idle, draws from the last plot down while this process draws from the first up."""
    plots = metric_plots(verdict, golden, current, replicates)
    draw_shared(plots, make_folder(out_dir / "plots"))
    return {plot.metric: f"plots/{plot.file_name}" for plot in plots}


def draw_shared(plots: Sequence[MetricPlot], plots_dir: Path) -> None:
    """Draw every one of ``plots`` into ``plots_dir``, with the worker's help where it runs (a plot this process
    cannot draw raises, as drawing alone would)."""
    worker = prepare() if len(plots) > 1 else None
    drawer = Drawer()
    try:
        if worker is not None and _sharing.acquire(blocking=False):
            try:
                worker.share(plots, plots_dir, drawer)
            finally:
                _sharing.release()
        else:
            for plot in plots:
                drawer.draw(plot, plots_dir)
    finally:
        drawer.close()


class WorkerGone(Exception):
    """The worker's pipe closed or carried something that is not a message."""


class FrameReader:
    """Length-prefixed pickled messages from a pipe, read without blocking past ``timeout``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def read(self, timeout: float) -> list[Any]:
        """The messages that arrive within ``timeout`` seconds (all that are complete); WorkerGone at EOF."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if ready:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise WorkerGone("the pipe closed")
            self.buffer += chunk
        messages = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            try:
                messages.append(pickle.loads(bytes(self.buffer[_HEADER.size:_HEADER.size + size])))
            except Exception as exc:  # noqa: BLE001 - a garbled pipe is a gone worker
                raise WorkerGone(f"unreadable message: {exc}") from None
            del self.buffer[:_HEADER.size + size]
        return messages


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class PlotWorker:
    """The harness's end of a running worker."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.reader = FrameReader(proc.stdout.fileno())
        self.jobs = 0
        self.ready = False

    def _read(self, timeout: float) -> list[Any]:
        """The worker's messages about the current job that arrive within ``timeout`` (``ready`` is noted)."""
        current = []
        for message in self.reader.read(timeout):
            if message[0] == "ready":
                self.ready = True
            elif message[1] == self.jobs:
                current.append(message)
        return current

    @classmethod
    def start(cls) -> PlotWorker | None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "autotest.report.plot_worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd="/")
        except OSError:
            return None  # the harness draws alone
        worker = cls(proc)
        atexit.register(worker.stop)
        return worker

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until matplotlib is imported there (benchmarks and tests); False when it is not by then."""
        deadline = time.monotonic() + timeout_s
        try:
            while not self.ready and time.monotonic() < deadline:
                self._read(deadline - time.monotonic())
        except WorkerGone:
            return False
        return self.ready

    def stop(self) -> None:
        """Close its stdin (it exits) and reap it; killed when it does not exit at once."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def _send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(_frame(message))
        self.proc.stdin.flush()

    def share(self, plots: Sequence[MetricPlot], plots_dir: Path, drawer: Drawer) -> set[int]:
        """Draw ``plots`` with the worker: this process from the first up, the worker from the last down;
        the indices of the plots the worker drew."""
        global _worker
        self.jobs += 1
        job = self.jobs
        done: set[int] = set()
        by_worker: set[int] = set()
        worker_from = len(plots)  # the lowest plot the worker has started
        ended = False

        def take(timeout: float) -> None:
            nonlocal worker_from, ended
            for kind, _, *rest in self._read(timeout):
                if kind == "start":
                    worker_from = min(worker_from, rest[0])
                elif kind == "done":
                    done.add(rest[0])
                    by_worker.add(rest[0])
                elif kind == "end":
                    ended = True

        try:
            self._send(("job", job, str(plots_dir), list(plots)))
            for index, plot in enumerate(plots):
                take(0)
                if index >= worker_from:
                    break
                self._send(("claim", job, index))
                drawer.draw(plot, plots_dir)
                done.add(index)
            deadline = time.monotonic() + FINISH_WAIT_S
            while not ended and time.monotonic() < deadline and not done.issuperset(range(worker_from, len(plots))):
                take(deadline - time.monotonic())
        except (OSError, WorkerGone):
            pass
        if not ended and not done.issuperset(range(len(plots))):
            # dead, garbled or stuck: stop it; the plots it did not finish are drawn here
            self.stop()
            with _starting:
                if _worker is self:
                    _worker = None
        for index, plot in enumerate(plots):
            if index not in done:
                drawer.draw(plot, plots_dir)
        return by_worker


# ---------------------------------------------------------------- the worker process


def _orders(stdin: Any, inbox: queue.Queue) -> None:
    """Read the harness's messages into ``inbox`` as they come (so its writes never wait on a busy worker);
    None at EOF or on anything unreadable."""
    try:
        while True:
            header = stdin.read(_HEADER.size)
            if len(header) < _HEADER.size:
                break
            (size,) = _HEADER.unpack(header)
            data = stdin.read(size)
            if len(data) < size:
                break
            inbox.put(pickle.loads(data))
    except Exception:  # noqa: BLE001 - whatever broke the pipe, the answer is to stop
        pass
    inbox.put(None)


def serve(stdin: Any, out_fd: int) -> int:
    inbox: queue.Queue = queue.Queue()
    threading.Thread(target=_orders, args=(stdin, inbox), daemon=True).start()
    warnings.simplefilter("ignore")  # as the harness's own drawing: a warning never reaches a terminal
    drawer = Drawer()  # matplotlib's import, paid while the harness still runs or judges

    def send(*message: Any) -> None:
        os.write(out_fd, _frame(message))

    send("ready", 0)

    while True:
        message = inbox.get()
        if message is None:
            return 0
        if message[0] != "job":
            continue  # a claim that came after this worker had finished that job
        _, job, plots_dir, plots = message
        claimed = -1
        for index in range(len(plots) - 1, -1, -1):
            while True:
                try:
                    order = inbox.get_nowait()
                except queue.Empty:
                    break
                if order is None:
                    return 0
                if order[0] == "claim" and order[1] == job:
                    claimed = max(claimed, order[2])
            if index <= claimed:
                break
            send("start", job, index)
            try:
                drawer.draw(plots[index], Path(plots_dir))
            except Exception:  # noqa: BLE001 - not "done": the harness draws it, and says what is wrong
                continue
            send("done", job, index)
        send("end", job)


def main() -> int:
    out_fd = os.dup(1)  # the messages' pipe; anything else printed goes nowhere
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        return serve(sys.stdin.buffer, out_fd)
    except (KeyboardInterrupt, BrokenPipeError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
