"""Runs as Ray tasks on a multi-node cluster: the one dispatch bisect probes and calibration runs share.

Each call goes out as one Ray task that asks for the cores, GPUs and custom resources its run needs
(``--ray-resource probe=1``), so Ray places it on a node that has them; the run itself is the ordinary
pipeline on that node (a process group, its watchdog). Facts of Ray 2.60 this relies on (its installed source):

- a task whose worker process or node dies is retried by Ray up to ``max_retries`` times; an exception the
  call raises is not (``retry_exceptions`` False). With ``max_retries=1`` a run whose node is removed re-runs
  on another node exactly once; a second loss answers through ``lost``;
- ``ray.cancel(ref)`` raises KeyboardInterrupt inside a running task (the pipeline there stops its process
  group and publishes an ERROR verdict) and drops a task not yet started; ``force=True`` kills the worker,
  whose watchdog (:mod:`autotest.run.watchdog`) then stops the run's session;
- a task asking for resources no node has waits for ever (infeasible): the cluster is checked first.

Every attempt appends one line (node, pid, time) to ``<call folder>/ray_attempts.jsonl``: with the results
on shared storage, a re-run after a lost node is in the results. Ray is imported only here, inside functions.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from autotest.errors import UsageError
from autotest.run.interrupts import Interrupted, stop_requested

T = TypeVar("T")

EXTRA_HINT = "pip install 'rl-autotest[workloads]'"
ATTEMPTS_FILE = "ray_attempts.jsonl"
#: Ray's own retries of a task whose worker or node died: one re-run, elsewhere if the node is gone
MAX_RETRIES = 1
WAIT_INTERVAL_S = 1.0
#: after an interrupt, how long the cancelled runs get to stop and publish before their workers are killed
CANCEL_WAIT_S = 30.0
_BUILTIN = {"CPU", "GPU", "memory", "object_store_memory"}


@dataclass(frozen=True)
class RayPlacement:
    """Where each run goes: the cluster (``local``: a private one-node cluster) and what a run needs there."""

    address: str
    #: custom resources a run asks for (``probe: 1``), so it lands on a node that offers them
    resources: Mapping[str, float] = field(default_factory=dict)
    num_cpus: float = 1.0
    num_gpus: float = 0.0


@dataclass(frozen=True)
class RayCall(Generic[T]):
    """One run: a label for the progress lines, its results folder (shared storage), the call itself."""

    label: str
    folder: Path
    fn: Callable[[], T]


def parse_resources(values: Sequence[str], flag: str = "--ray-resource") -> dict[str, float]:
    """``NAME=AMOUNT`` strings (``probe=1``) as a resource dict; a bad one is a one-line UsageError."""
    resources: dict[str, float] = {}
    for value in values:
        name, sep, amount = value.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"{flag} {value!r}: give NAME=AMOUNT, e.g. {flag} probe=1")
        if name in _BUILTIN:
            raise UsageError(f"{flag} {value!r}: {name} is Ray's own resource and follows from the case "
                             "(platform.gpus, one core); name a custom resource")
        try:
            number = float(amount)
        except ValueError:
            raise UsageError(f"{flag} {value!r}: {amount!r} is not a number") from None
        if not math.isfinite(number) or number <= 0:
            raise UsageError(f"{flag} {value!r}: the amount must be above 0")
        resources[name] = number
    return resources


def requested_resources(address: str | None, values: Sequence[str],
                        address_flags: str = "--ray-jobs") -> dict[str, float]:
    """The ``--ray-resource`` values as a resource dict; they need a cluster to place on (``address``)."""
    if values and not address:
        raise UsageError(f"--ray-resource: needs {address_flags} (the cluster whose nodes offer it)")
    return parse_resources(values)


def missing_resources(asked: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> str | None:
    """None when one node offers everything ``asked``; else a line saying what the nodes offer."""
    if any(all(node.get(k, 0.0) >= v for k, v in asked.items()) for node in nodes):
        return None
    want = ", ".join(f"{k}={v:g}" for k, v in sorted(asked.items()))
    offers = "; ".join(", ".join(f"{k}={v:g}" for k, v in sorted(node.items())
                                 if k not in ("memory", "object_store_memory")
                                 and not k.startswith(("node:", "accelerator_type")))
                       for node in nodes) or "no live node"
    return f"no node offers {want} (the nodes offer: {offers})"


def attempts(folder: Path) -> list[dict[str, Any]]:
    """The attempts recorded for one call, oldest first (two when its node was lost and it re-ran)."""
    path = Path(folder) / ATTEMPTS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _attempt(label: str, folder: Path, fn: Callable[[], T]) -> T:
    """The task body on the chosen node: note the attempt, then run the call."""
    import ray

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    line = {"label": label, "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
            "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    with (folder / ATTEMPTS_FILE).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return fn()


@contextmanager
def connected(address: str) -> Iterator[Any]:
    """The ``ray`` module, connected to ``address`` for the block (a one-line UsageError when it cannot be)."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray-tasks {address}: Ray tasks need ray; install it with {EXTRA_HINT}") from None
    kwargs: dict[str, Any] = {"log_to_driver": False}
    temp_dir = None
    if address == "local":  # a private cluster of this node, in a short temp dir (Ray's socket paths are short)
        temp_dir = tempfile.mkdtemp(prefix="rlat-ray-")
        kwargs.update(_temp_dir=temp_dir, include_dashboard=False, num_cpus=os.cpu_count() or 1,
                      _node_ip_address="127.0.0.1")
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        text = " ".join(str(exc).split())[:300]
        raise UsageError(f"--ray-tasks {address}: cannot connect to the Ray cluster ({text}); give the head's "
                         "GCS address (host:6379) or 'local'") from None
    try:
        yield ray
    finally:
        ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def run_on_cluster(calls: Sequence[RayCall[T]], placement: RayPlacement, *, lost: Callable[[int, str], T],
                   say: Callable[[str], None] | None = None) -> list[T]:
    """Run every call as a Ray task placed by ``placement``; results in call order.

    A call whose node was lost twice answers ``lost(index, why)``; an exception a call raises comes back as
    itself. An interrupt (KeyboardInterrupt here, or a stop requested from another thread) cancels every task,
    gives the running ones ``CANCEL_WAIT_S`` to stop their runs, kills what is left, and goes on up.
    """
    say = say or (lambda line: None)
    with connected(placement.address) as ray:
        asked = {**placement.resources, "CPU": placement.num_cpus}
        if placement.num_gpus:
            asked["GPU"] = placement.num_gpus
        problem = missing_resources(asked, [node["Resources"] for node in ray.nodes() if node["Alive"]])
        if problem:
            raise UsageError(f"--ray-tasks {placement.address}: {problem}; start nodes with "
                             "`ray start --resources '{\"NAME\": N}'` or change --ray-resource")
        task = ray.remote(_attempt).options(num_cpus=placement.num_cpus, num_gpus=placement.num_gpus,
                                            resources=dict(placement.resources), max_retries=MAX_RETRIES,
                                            retry_exceptions=False)
        refs = [task.remote(call.label, call.folder, call.fn) for call in calls]
        index = {ref: i for i, ref in enumerate(refs)}
        results: dict[int, T] = {}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=WAIT_INTERVAL_S)
                for ref in done:
                    results[index[ref]] = _result(ray, ref, index[ref], calls[index[ref]], lost, say)
                if stop_requested():
                    raise Interrupted(stop_requested() or "stop requested")
        except BaseException:
            _cancel(ray, pending, say)
            raise
        return [results[i] for i in range(len(calls))]


def _result(ray: Any, ref: Any, i: int, call: RayCall[T], lost: Callable[[int, str], T],
            say: Callable[[str], None]) -> T:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # the call itself raised: the same error, here
        raise exc.as_instanceof_cause() from None
    except ray.exceptions.RayError as exc:  # worker or node lost on every attempt Ray made
        why = f"{type(exc).__name__} after {MAX_RETRIES + 1} attempt(s): {' '.join(str(exc).split())[:300]}"
        say(f"[ray] {call.label}: lost ({why})")
        return lost(i, why)


def _cancel(ray: Any, pending: Sequence[Any], say: Callable[[str], None]) -> None:
    """Cancel every unfinished task; those still running after ``CANCEL_WAIT_S`` have their workers killed."""
    if not pending:
        return
    say(f"[ray] stopping {len(pending)} task(s)")
    for ref in pending:
        ray.cancel(ref, force=False)
    _, left = ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_WAIT_S)
    for ref in left:
        ray.cancel(ref, force=True)
    if left:
        ray.wait(list(left), num_returns=len(left), timeout=CANCEL_WAIT_S)
