"""Runner contention: what else used the machine while a run went, and how fast the machine was.

Recorded with every run (a snapshot in preflight.json before it, samples during it and a snapshot after it in
results.json) so that a performance gate can tell a slow change from a busy runner
(:mod:`autotest.judge.performance` decides; this module only measures):

- :func:`snapshot`: load average, CPU steal and the other processes' share of the CPUs over a short window, and
  on GPU nodes the state of the case's GPUs (other processes on them and their memory, SM clocks, throttle
  reasons) from ``nvidia-smi``;
- :func:`machine_probe`: the same fixed compute kernel timed (wall and CPU seconds) before and after the run;
- :class:`ContentionSampler`: a thread that samples the run's process tree while it goes: the CPU time its
  threads got and the time they waited, runnable, for a CPU (the kernel's per-thread ``schedstat`` run delay,
  which is exactly what a neighbour's work costs the run), and the machine's load beside it.

Linux /proc only; where it is missing every figure is recorded as unavailable with the reason, never invented.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autotest.errors import WriteFailed
from autotest.files import write_atomic
from autotest.run.gpu_state import gpu_probe, gpu_state
from autotest.run.proctable import descendants

#: how often the sampler reads the run's threads and the machine (a read costs about a millisecond per process)
SAMPLE_INTERVAL_S = 0.5
#: the shortest window :func:`snapshot` measures the machine's CPU use over (the CPU probe takes longer)
MIN_SNAPSHOT_WINDOW_S = 0.1
_PROBE_ITERATIONS = 800_000
_PROBE_REPEATS = 3


# ---------------------------------------------------------------- reading /proc


def cpu_ticks(stat_text: str | None = None) -> tuple[int, int, int] | None:
    """(busy, total, steal) clock ticks of all CPUs since boot from ``/proc/stat``; None where there is none."""
    if stat_text is None:
        try:
            stat_text = Path("/proc/stat").read_text()
        except OSError:
            return None
    line = next((row for row in stat_text.splitlines() if row.startswith("cpu ")), None)
    if line is None:
        return None
    values = [int(v) for v in line.split()[1:]]
    values += [0] * (8 - len(values))
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    # guest time is already counted in user; idle and iowait are the CPUs doing nothing
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait, steal


def thread_times(pids: Sequence[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """{(pid, tid): (cpu_ns, run_delay_ns)} of every thread of ``pids`` from ``/proc/<pid>/task/<tid>/schedstat``."""
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # exited while we looked
        for tid in tasks:
            try:
                fields = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
                found[(pid, int(tid))] = (int(fields[0]), int(fields[1]))
            except (OSError, ValueError, IndexError):
                continue
    return found


def loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ---------------------------------------------------------------- the probe


def _kernel(n: int) -> int:
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


def machine_probe(device: str = "cpu", environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A fixed kernel timed on ``device`` a few times: its CPU seconds (the fastest repeat: the machine's speed, a
    slower or throttled node takes longer) and wall seconds (that CPU time x the median wall / CPU ratio of the
    repeats: how long the harness waited for a CPU, i.e. contention)."""
    if device == "gpu":
        return gpu_probe(environ or os.environ)
    runs = []
    for _ in range(_PROBE_REPEATS):
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        _kernel(_PROBE_ITERATIONS)
        runs.append((time.perf_counter() - wall0, time.thread_time() - cpu0))
    ratios = sorted(wall / cpu for wall, cpu in runs if cpu > 0)
    # the fastest CPU time is the machine's speed; the median wall / CPU ratio its contention
    return {"device": "cpu", "kernel": f"python integer loop x{_PROBE_ITERATIONS}",
            "cpu_s": round(min(cpu for _, cpu in runs), 4),
            "wall_s": round(min(cpu for _, cpu in runs) * (ratios[len(ratios) // 2] if ratios else 1.0), 4)}


# ---------------------------------------------------------------- snapshot before and after


def snapshot(environ: Mapping[str, str] | None = None, ours: set[int] | None = None,
             device: str = "cpu") -> dict[str, Any]:
    """The machine now: the probe, and over the time it takes, load per core, steal and the other processes'
    share of the CPUs (the harness's own CPU time taken out); the case's GPUs."""
    env = os.environ if environ is None else environ
    own = {os.getpid(), *(ours or set())}
    cpus = os.cpu_count() or 1
    before, own_before, t0 = cpu_ticks(), _own_cpu_s(own), time.monotonic()
    probe = machine_probe(device, env)
    if time.monotonic() - t0 < MIN_SNAPSHOT_WINDOW_S:  # a GPU probe that failed at once: still measure a window
        time.sleep(MIN_SNAPSHOT_WINDOW_S)
    after, own_after, elapsed = cpu_ticks(), _own_cpu_s(own), time.monotonic() - t0
    load = loadavg()
    record: dict[str, Any] = {"at": time.time(), "cpu_count": cpus,
                              "load_per_core": round(load / cpus, 3) if load is not None else None}
    if before is not None and after is not None and after[1] > before[1]:
        ticks = after[1] - before[1]
        tick_s = elapsed * cpus / ticks
        others = (after[0] - before[0] - (after[2] - before[2])) * tick_s - (own_after - own_before)
        record["steal_share"] = round((after[2] - before[2]) / ticks, 4)
        record["others_cpu_share"] = round(min(1.0, max(0.0, others / (elapsed * cpus))), 4)
    else:
        record["unavailable"] = "no /proc/stat (not Linux)"
    gpus = gpu_state(env, own)
    if gpus is not None:
        record["gpu"] = gpus
    record["probe"] = probe
    return record


def _own_cpu_s(pids: set[int]) -> float:
    return sum(cpu for cpu, _ in thread_times(sorted(pids)).values()) / 1e9


# ---------------------------------------------------------------- during the run


@dataclass(frozen=True)
class Sample:
    """The run's process tree and the machine at one instant; cumulative since the sampler started."""

    t: float  # time.monotonic()
    cpu_s: float  # CPU time the run's threads got
    delay_s: float  # time they waited, runnable, for a CPU
    threads: int
    others_cpu_share: float | None  # since the previous sample
    load_per_core: float | None


@dataclass(frozen=True)
class ContentionRecord:
    """What the sampler saw: its samples, the snapshots before and after, and why a figure is missing."""

    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()
    #: step -> time.monotonic() when the step's row was first seen in the log (the follower's)
    step_seen_at: Mapping[int, float] = field(default_factory=dict)
    #: why the run's own threads were not measured (a Ray job on a cluster, no /proc), empty when they were
    unmeasured: str = ""

    @property
    def tree_cpu_s(self) -> float | None:
        """CPU time the run's process tree got while sampled (its cost on CPU); None when it was not measured."""
        return self.samples[-1].cpu_s if self.samples and not self.unmeasured else None

    def to_dict(self) -> dict[str, Any]:
        """For results.json: the snapshots and a summary of the samples (the full series is in contention.json)."""
        return {"before": self.before, "after": self.after, "unmeasured": self.unmeasured,
                "samples": len(self.samples), "during": summarise(self.samples)}

    def series(self) -> dict[str, Any]:
        return {"samples": [asdict(s) for s in self.samples],
                "step_seen_at": {str(k): v for k, v in sorted(self.step_seen_at.items())}}


def summarise(samples: Sequence[Sample]) -> dict[str, Any]:
    """The run's contention over the sampled span: its threads' wait share, the load, the others' CPU share."""
    if len(samples) < 2:
        return {}
    first, last = samples[0], samples[-1]
    cpu, delay = last.cpu_s - first.cpu_s, last.delay_s - first.delay_s
    loads = [s.load_per_core for s in samples if s.load_per_core is not None]
    others = [s.others_cpu_share for s in samples[1:] if s.others_cpu_share is not None]
    return {"span_s": round(last.t - first.t, 2), "cpu_s": round(cpu, 3), "run_delay_s": round(delay, 3),
            "run_delay_share": round(delay / (cpu + delay), 4) if cpu + delay > 0 else None,
            "load_per_core_mean": round(sum(loads) / len(loads), 3) if loads else None,
            "load_per_core_max": round(max(loads), 3) if loads else None,
            "others_cpu_share_mean": round(sum(others) / len(others), 4) if others else None}


class ContentionSampler:
    """Samples the run's process tree (the launched process and its descendants) every ``interval_s`` in a thread.

    ``attach(pid)`` is called by the launcher once the run's process exists; ``stop()`` returns the record. Per
    thread counters are accumulated as increments, so a process or thread that exits keeps what it used.
    """

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._root: int | None = None
        self._last: dict[tuple[int, int], tuple[int, int]] = {}
        self._cpu_ns = 0
        self._delay_ns = 0
        self._harness_ns = 0
        self._harness_at_last = 0
        self._harness_last: dict[tuple[int, int], int] = {}
        self._ticks = cpu_ticks()
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.available = Path("/proc/self/task").is_dir()

    def attach(self, pid: int) -> None:
        """Start sampling the tree of ``pid`` (the launcher's callback once the run's process exists)."""
        self._root = pid
        if self._thread is None and self.available:
            self._thread = threading.Thread(target=self._loop, name="contention-sampler", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        root = self._root
        if root is None:
            return
        pids = [root, *descendants(root)]
        now_threads = thread_times(pids)
        for key, (cpu, delay) in now_threads.items():
            last_cpu, last_delay = self._last.get(key, (0, 0))
            self._cpu_ns += max(0, cpu - last_cpu)
            self._delay_ns += max(0, delay - last_delay)
        self._last.update(now_threads)
        for key, (cpu, _) in thread_times([os.getpid()]).items():  # the harness's own threads are not "others"
            self._harness_ns += max(0, cpu - self._harness_last.get(key, 0))
            self._harness_last[key] = cpu
        ticks, others = cpu_ticks(), None
        t = self.clock()
        with self._lock:
            if ticks is not None and self._ticks is not None and self._samples and ticks[1] > self._ticks[1]:
                cpus = os.cpu_count() or 1
                span = t - self._samples[-1].t
                tick_s = span * cpus / (ticks[1] - self._ticks[1])
                ours = self._cpu_ns / 1e9 - self._samples[-1].cpu_s + (self._harness_ns - self._harness_at_last) / 1e9
                used = (ticks[0] - self._ticks[0] - (ticks[2] - self._ticks[2])) * tick_s
                others = round(max(0.0, (used - ours) / (span * cpus)), 4) if span > 0 else None
            self._ticks = ticks
            self._harness_at_last = self._harness_ns
            load = loadavg()
            cpus = os.cpu_count() or 1
            self._samples.append(Sample(t, self._cpu_ns / 1e9, self._delay_ns / 1e9, len(now_threads), others,
                                        round(load / cpus, 3) if load is not None else None))

    def samples(self) -> tuple[Sample, ...]:
        """The samples so far (the follower reads them while the run goes)."""
        with self._lock:
            return tuple(self._samples)

    def stop(self) -> tuple[Sample, ...]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._root is not None and self.available:
            self.sample()  # the last increments of the processes still there
        return self.samples()


# ---------------------------------------------------------------- where it is kept


def record_in_preflight(preflight_json: Path, before: dict[str, Any]) -> None:
    """Add the snapshot before the run to preflight.json (``machine``); a file that cannot be read is left alone."""
    try:
        data = json.loads(preflight_json.read_text())
        write_atomic(preflight_json, json.dumps({**data, "machine": before}, indent=2) + "\n")
    except (OSError, ValueError, WriteFailed):
        pass  # results.json carries the same snapshot


def save_series(path: Path, record: ContentionRecord) -> str:
    """The full sample series to ``path`` (results.json keeps the summary); the path, or why it was not saved."""
    try:
        write_atomic(path, json.dumps({**record.to_dict(), **record.series()}, indent=1) + "\n")
    except WriteFailed as exc:
        return f"not saved: {exc}"
    return str(path)
