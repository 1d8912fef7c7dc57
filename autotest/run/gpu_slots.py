"""Give parallel cases on one node disjoint GPUs: a lock-file allocator shared by processes.

pytest-xdist runs cases in separate worker processes. Each case asks for the number of
GPUs it needs; `acquire` hands it a set of device indices that no other live holder has
(to export as CUDA_VISIBLE_DEVICES) or waits until enough are free.

Every GPU is one lock file held with `flock`. The kernel drops the lock when the holder's
file descriptor closes, which includes the holder dying in any way (crash, SIGKILL, OOM
killer), so a dead case never keeps GPUs. filelock is not used here on purpose: its 4.x
releases fall back to marker-file locks on filesystems without flock, and a marker
outlives a killed holder.

Picking GPUs happens under one node-wide allocator lock so that two cases never each
take half of what they need and wait on each other forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autotest.errors import UsageError
from autotest.run.platform import detect_gpus

_ALLOCATOR_LOCK = "allocator.lock"
_DEFAULT_POLL_S = 0.2


class GpuSlotTimeout(TimeoutError):
    """Not enough GPUs became free before the timeout; the message names the holders."""


@dataclass(frozen=True)
class SlotHolder:
    """Who holds a GPU, as written by the holder (informative only; the lock is the truth)."""

    gpu: int
    pid: int
    label: str


SLOTS_DIR_ENV = "RL_AUTOTEST_SLOTS_DIR"


def slots_dir_for(results_root: str | os.PathLike[str], hostname: str | None = None) -> Path:
    """The lock directory for this node: ``$RL_AUTOTEST_SLOTS_DIR``, else under a results root.

    CI sets ``RL_AUTOTEST_SLOTS_DIR`` to a node-wide folder (e.g. /var/tmp/rl-autotest-slots) so that
    two runners on one node, each with its own results root and RUNNER_TEMP, see each other's locks.
    The host name is part of the path because a folder on a shared filesystem is seen by several
    nodes, and each node has its own GPU 0.
    """
    node_wide = os.environ.get(SLOTS_DIR_ENV)
    root = Path(node_wide) if node_wide else Path(results_root) / ".gpu_slots"
    return root / (hostname or socket.gethostname())


def cuda_visible_devices(devices: list[int]) -> str:
    """The CUDA_VISIBLE_DEVICES value for a device list: "0,1,2"."""
    return ",".join(str(index) for index in devices)


class _Flock:
    """One exclusive flock on one file; released by close() or by the process ending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self, deadline: float, poll_s: float) -> bool:
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _gpu_lock_path(slots_dir: Path, gpu: int) -> Path:
    return slots_dir / f"gpu{gpu}.lock"


def _owner_path(slots_dir: Path, gpu: int) -> Path:
    return slots_dir / f"gpu{gpu}.owner.json"


def _choose(free: list[int], num_gpus: int) -> list[int]:
    """Prefer an aligned contiguous block (GPUs 0-3 or 4-7 share a switch), else the lowest free."""
    free_set = set(free)
    total = max(free) + 1 if free else 0
    for start in range(0, total, num_gpus):
        block = list(range(start, start + num_gpus))
        if free_set.issuperset(block):
            return block
    return free[:num_gpus]


def current_holders(slots_dir: str | os.PathLike[str], total_gpus: int) -> list[SlotHolder]:
    """The holders of GPUs whose lock is taken right now, from their owner notes."""
    directory = Path(slots_dir)
    if not directory.is_dir():
        return []
    holders = []
    for gpu in range(total_gpus):
        probe = _Flock(_gpu_lock_path(directory, gpu))
        if probe.try_acquire():
            probe.release()
            continue
        try:
            note = json.loads(_owner_path(directory, gpu).read_text())
            holders.append(SlotHolder(gpu=gpu, pid=int(note["pid"]), label=str(note["label"])))
        except (OSError, ValueError, KeyError):
            holders.append(SlotHolder(gpu=gpu, pid=-1, label="unknown"))
    return holders


def _try_take(directory: Path, num_gpus: int, total_gpus: int) -> tuple[list[int], list[_Flock]] | None:
    """Under the allocator lock: lock `num_gpus` free GPUs, or none at all."""
    probes = {gpu: _Flock(_gpu_lock_path(directory, gpu)) for gpu in range(total_gpus)}
    free = [gpu for gpu, probe in probes.items() if probe.try_acquire()]
    chosen = _choose(free, num_gpus) if len(free) >= num_gpus else []
    for gpu in free:
        if gpu not in chosen:
            probes[gpu].release()
    if not chosen:
        return None
    return chosen, [probes[gpu] for gpu in chosen]


@contextlib.contextmanager
def acquire(
    num_gpus: int,
    total_gpus: int,
    timeout_s: float,
    slots_dir: str | os.PathLike[str],
    *,
    label: str = "",
    poll_s: float = _DEFAULT_POLL_S,
) -> Iterator[list[int]]:
    """Hold `num_gpus` of the node's `total_gpus` GPUs for the duration of the block.

    Yields the sorted device indices. Waits while too few are free and raises
    GpuSlotTimeout after `timeout_s`. `label` (a case name) is recorded so that a waiting
    case can say whom it waits for. A case that needs no GPU gets [] without locking.
    """
    if num_gpus < 0 or total_gpus < 0:
        raise UsageError(f"gpu slots: num_gpus={num_gpus} and total_gpus={total_gpus} must be >= 0")
    if num_gpus > total_gpus:
        raise UsageError(
            f"gpu slots: the case needs {num_gpus} GPUs but this node has {total_gpus}; "
            "run it on a bigger node or lower the case's GPU count"
        )
    if num_gpus == 0:
        yield []
        return
    directory = Path(slots_dir)
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    allocator = _Flock(directory / _ALLOCATOR_LOCK)
    taken = None
    while taken is None:
        if not allocator.acquire(deadline, poll_s):
            break
        try:
            taken = _try_take(directory, num_gpus, total_gpus)
        finally:
            allocator.release()
        if taken is None:
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    if taken is None:
        holders = current_holders(directory, total_gpus)
        held_by = ", ".join(f"GPU {h.gpu}: pid {h.pid} ({h.label or 'no label'})" for h in holders)
        raise GpuSlotTimeout(
            f"waited {timeout_s:g} s for {num_gpus} of {total_gpus} GPUs in {directory}; "
            f"held: {held_by or 'none (allocator busy)'}"
        )
    devices, locks = taken
    try:
        note = json.dumps({"pid": os.getpid(), "label": label})
        for gpu in devices:
            _owner_path(directory, gpu).write_text(note)
        yield devices
    finally:
        for lock in locks:
            lock.release()


@contextlib.contextmanager
def case_slice(num_gpus: int, results_root: Path, wait_s: float, label: str = "") -> Iterator[dict[str, str]]:
    """Hold a disjoint GPU slice of this node for one run; yields the environment that pins it.

    A case that takes the whole node gets no ``CUDA_VISIBLE_DEVICES`` (the MOPD launch script
    places teachers by GPU index itself); a node with too few GPUs gets {} (the platform check
    skips the case with its reason).
    """
    total = detect_gpus().count if num_gpus > 0 else 0
    if num_gpus <= 0 or total < num_gpus:
        yield {}
        return
    with acquire(num_gpus, total, wait_s, slots_dir_for(results_root), label=label) as devices:
        yield {} if len(devices) == total else {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(devices)}
