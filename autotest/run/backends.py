"""One launch interface, two backends: a local process group, or a Ray job on a cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from autotest.run.launch import LaunchResult, LaunchSpec, PollCallback
from autotest.run.process_group import launch
from autotest.run.ray_job import submit


def start(spec: LaunchSpec, results_dir: Path, *, poll: PollCallback | None = None, poll_interval_s: float = 0.1,
          ray_address: str | None = None, num_gpus: int = 0,
          ray_resources: Mapping[str, float] | None = None,
          on_start: Callable[[int], None] | None = None) -> LaunchResult:
    """Run ``spec`` to its end in a local process group, or as a Ray job on the cluster at ``ray_address``.

    Both write the same logs and launch.json, enforce the timeout, call ``poll`` (a non-empty
    answer stops the run) and clean up whatever the ending. ``on_start`` gets the local run's pid (a Ray job's
    processes live on the cluster: it is not called).
    """
    if ray_address:
        # the job server is polled over HTTP: no faster than its own status interval
        return submit(spec, results_dir, address=ray_address, num_gpus=num_gpus, resources=ray_resources, poll=poll,
                      poll_interval_s=max(poll_interval_s, 0.5))
    return launch(spec, results_dir, poll=poll, poll_interval_s=poll_interval_s, on_start=on_start)
