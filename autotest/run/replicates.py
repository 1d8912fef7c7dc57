"""Running several seeds of one case side by side: which seeds, which folders, how many at once.

Replicates (``replicates: K`` in a case, ``--replicates K``) and calibration (N runs) both run a case
several times on this node; each run is a normal pipeline run (:func:`autotest.pipeline.run_case`)
into its own folder. Judging the replicates' mean is :mod:`autotest.judge.replicate_mean`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from autotest.inputs.case import Case
from autotest.run.interrupts import clear_stop, describe, request_stop
from autotest.run.platform import detect_gpus

T = TypeVar("T")


def default_jobs(case: Case, runs: int) -> int:
    """Runs side by side on this node: one per CPU (embedded cases cap torch threads), or per GPU slice."""
    if case.platform.gpus > 0:
        return max(1, min(runs, detect_gpus().count // case.platform.gpus))
    return max(1, min(runs, os.cpu_count() or 1))


def replicate_seeds(case: Case, count: int, first: int) -> tuple[int, ...]:
    """Replicate 1 runs ``first`` (the seed a single run would use); the others the next seeds outside the
    calibration set, so they are independent of the golden as the threshold scaling assumes.

    A case that takes no seed has one seed, ``first``: the pipeline refuses K > 1 for it
    (:mod:`autotest.inputs.replicate_limits`), since K copies of one seed are not K samples.
    """
    if not case.takes_seed:
        if count > 1:
            raise ValueError(f"{case.name}: {count} replicates of a launch that takes no seed")
        return (first,)
    taken = set(case.seed.calibration) | {first}
    seeds, candidate = [first], first
    while len(seeds) < count:
        candidate += 1
        if candidate not in taken:
            seeds.append(candidate)
    return tuple(seeds)


REPLICATES_FOLDER = "replicates"


def replicate_folder(results_dir: Path, index: int, seed: int) -> Path:
    """``<results>/replicates/r<i>-seed<S>``: a replicate's own results folder (logs, tracker, work dir)."""
    return Path(results_dir) / REPLICATES_FOLDER / f"r{index}-seed{seed}"


def run_folder_of(results_dir: str | Path) -> Path:
    """The run a replicate's folder belongs to (``<run>/replicates/<r>`` -> ``<run>``); any other folder itself."""
    folder = Path(results_dir)
    return folder.parent.parent if folder.parent.name == REPLICATES_FOLDER else folder


def side_by_side(tasks: Sequence[Callable[[], T]], jobs: int) -> list[T]:
    """Run ``tasks`` in ``jobs`` threads; results in task order.

    A signal reaches only this (the main) thread while the runs wait in the pool: every run is asked
    to stop now, not when each has finished (each publishes its ERROR verdict on the way out), and the
    interrupt goes on up once they all have ended. A task that raises stops the others the same way.
    """
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = [pool.submit(task) for task in tasks]
        return [future.result() for future in futures]
    except BaseException as exc:
        request_stop(describe(exc))
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        clear_stop()
