"""Run one training command as a Ray job on an existing cluster, and always stop it after.

``submit`` is the Ray twin of :func:`autotest.run.launch.launch`: same ``LaunchSpec`` in, same
``LaunchResult`` out, same files (``logs/stdout.log``, ``logs/stderr.log``, ``logs/launch.json``)
and the same poll-callback contract. The command runs as the job's entrypoint
(``cd <cwd> && exec <command>``) with ``spec.env`` as ``runtime_env.env_vars`` and the case's
GPUs/CPUs reserved for it, so a nightly run fans out over the cluster's nodes.

What differs from a local launch, and why:

- The address is the job server's HTTP address (the dashboard, ``http://head:8265``);
  ``host:port`` is read as that too. ``ray://`` and ``auto`` go to Ray's client as they are.
- The job runs in the cluster's environment plus ``spec.env``, not the harness's: the command's
  paths (``{python}``, the repo, ``{work_dir}``) must exist on whichever node runs it. With more
  than one node, put the repo, the venv and the results root on shared storage, or
  ``collect_artifacts`` finds no tracker.
- Ray writes the driver's stdout and stderr into one log: it streams into ``stdout.log`` and
  ``stderr.log`` stays empty (``launch.json`` says so).
- ``timeout_s`` and ``wall_s`` count from the moment the job is seen RUNNING (where a local
  process would start); the wait for resources before that is bounded by ``pending_timeout_s``
  and recorded as ``ray.pending_s``. Ray cannot cancel a job that is still PENDING: the stop
  is requested, recorded as unconfirmed, and takes effect once the job is scheduled.
- The exit code comes from Ray's ``driver_exit_code`` where the server reports it, else from
  the "exit code N" in the job message; a STOPPED job has none.
- Should the harness die without stopping the job (SIGKILL, OOM), its watchdog
  (:mod:`autotest.run.watchdog`) asks the job server to stop it; it also stops a job that
  outlives its pending and run limits. A ``ray://`` client address has no job server to ask.
- A case that starts its own Ray (``launch.uses_ray``) is refused: its ``ray stop --force``
  would take down the cluster the job runs on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import shlex
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.run import watchdog
from autotest.run.interrupts import Interrupted, describe, stop_requested
from autotest.run.launch import (
    LaunchResult,
    LaunchSpec,
    PollCallback,
    RunInterrupted,
    final_launch_record,
    write_launch_record,
)

EXTRA_HINT = "pip install 'rl-autotest[workloads]'"
START_HINT = "start one with `ray start --head --dashboard-host 127.0.0.1`"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
STATUS_INTERVAL_S = 0.5  # job status; cheap (one small GET)
LOG_INTERVAL_S = 2.0  # logs: the server returns the whole log each time
CONNECT_TIMEOUT_S = 10.0
STOP_WAIT_S = 60.0  # Ray itself SIGKILLs RAY_JOB_STOP_WAIT_TIME_S (3 s) after the SIGTERM
PENDING_STOP_WAIT_S = 5.0  # a PENDING job's stop only takes effect once it is scheduled
CONTACT_LOST_S = 120.0  # a busy head may miss a few polls; this long without an answer is lost
MESSAGE_CHARS = 4000  # FAILED messages carry a 20,000-character log tail: the log has it all
_EXIT_CODE = re.compile(r"exit code (-?\d+)")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Ray's client prefers these variables to the address it is given: an explicit address must win
_ADDRESS_VARIABLES = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")

ClientFactory = Callable[[str], Any]


# ---------------------------------------------------------------- addresses and the client


def address_from(value: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The Ray address to submit to: ``value`` (``--ray-jobs``), else ``$RAY_ADDRESS``, else None."""
    env = os.environ if environ is None else environ
    return value or env.get("RAY_ADDRESS") or None


def normalize_address(address: str) -> str:
    """``http(s)://host:port`` as given; ``host:port`` becomes ``http://host:port``; others as given."""
    address = address.strip()
    if not address:
        raise UsageError("ray address: empty; give the job server's HTTP address, e.g. http://127.0.0.1:8265")
    if "://" in address or address == "auto":
        return address.rstrip("/")
    return f"http://{address.rstrip('/')}"


def _probe(url: str, timeout_s: float) -> None:
    """GET /api/version with a timeout: Ray's client itself waits as long as TCP does."""
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=timeout_s) as response:
            json.loads(response.read().decode() or "{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UsageError(f"cannot reach Ray job server at {url}: {_one_line(reason)}; {START_HINT} "
                         "and pass its dashboard address (http://127.0.0.1:8265)") from None


@contextmanager
def _explicit_address() -> Iterator[None]:
    saved = {k: os.environ.pop(k) for k in _ADDRESS_VARIABLES if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def connect(address: str, client_factory: ClientFactory | None = None) -> Any:
    """A job-submission client for ``address``, or a one-line UsageError saying why not."""
    url = normalize_address(address)
    if url.startswith(("http://", "https://")):
        _probe(url, CONNECT_TIMEOUT_S)
    if client_factory is None:
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError:
            raise UsageError(f"ray address {address}: Ray job submission needs ray[default]; "
                             f"install it with {EXTRA_HINT}") from None
        client_factory = JobSubmissionClient
    try:
        with _explicit_address():
            return client_factory(url)
    except Exception as exc:  # ConnectionError, RuntimeError (version), ValueError (GCS lookup) ...
        raise UsageError(f"cannot reach Ray job server at {url}: {_one_line(exc)}; {START_HINT}") from None


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:300] + ("..." if len(text) > 300 else "")


# ---------------------------------------------------------------- the job's shape


def entrypoint(spec: LaunchSpec) -> str:
    """The shell line Ray runs: the command in its cwd; ``exec`` so Ray's stop signals reach it."""
    return f"cd {shlex.quote(str(spec.cwd))} && exec {shlex.join(spec.argv)}"


def submission_id_for(results_dir: Path) -> str:
    """``rl-autotest-<case>-<run folder>-<random>``: names the run, unique on the cluster."""
    results_dir = Path(results_dir)
    name = _ID_UNSAFE.sub("_", f"{results_dir.parent.name}-{results_dir.name}").strip("_-.")[:80]
    return f"rl-autotest-{name}-{secrets.token_hex(3)}"


def exit_code_of(status: str, message: str | None, driver_exit_code: int | None) -> tuple[int | None, str | None]:
    """(exit code, signal name) of the driver. Ray reports a signal death as a negative code."""
    code: int | None
    if status == "SUCCEEDED":
        code = 0 if driver_exit_code is None else driver_exit_code
    elif status == "FAILED":
        match = _EXIT_CODE.search(message or "")
        code = driver_exit_code if driver_exit_code is not None else int(match.group(1)) if match else 1
    else:
        return None, None  # STOPPED (or never finished): no driver exit code to report
    if code < 0:
        try:
            return None, signal.Signals(-code).name
        except ValueError:
            return None, f"signal {-code}"
    return code, None


# ---------------------------------------------------------------- following the job


class _Job:
    """Status and log of one submitted job, tolerant of a job server that misses a few polls."""

    def __init__(self, client: Any, submission_id: str, stdout_log: Path) -> None:
        self.client = client
        self.id = submission_id
        self.stdout_log = stdout_log
        self.status = "PENDING"
        self.info: dict[str, Any] = {}
        self.log_chars = 0
        self.contact_errors = 0
        self.last_contact = time.monotonic()
        self.last_error: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def refresh(self) -> None:
        try:
            info = self.client.get_job_info(self.id)
        except Exception as exc:  # noqa: BLE001 - the server's error is recorded, not hidden
            self._missed(exc)
            return
        self.last_contact = time.monotonic()
        self.status = str(getattr(info.status, "value", info.status))
        # getattr: older servers lack driver_exit_code and friends
        self.info = {k: getattr(info, k, None) for k in ("message", "driver_exit_code", "driver_node_id")}
        error = getattr(info, "error_type", None)
        self.info["error_type"] = str(getattr(error, "value", error)) if error else None

    def fetch_logs(self) -> None:
        """Append the part of the job's log not written yet."""
        try:
            logs = self.client.get_job_logs(self.id) or ""
        except Exception as exc:  # noqa: BLE001
            self._missed(exc)
            return
        if len(logs) > self.log_chars:
            with self.stdout_log.open("a", encoding="utf-8", errors="replace") as out:
                out.write(logs[self.log_chars:])
            self.log_chars = len(logs)

    def _missed(self, exc: Exception) -> None:
        self.contact_errors += 1
        self.last_error = _one_line(f"{type(exc).__name__}: {exc}")

    def lost_for_s(self) -> float:
        return time.monotonic() - self.last_contact

    def stop(self, wait_s: float) -> dict[str, Any]:
        """Ask Ray to stop the job and wait (bounded) until it is terminal."""
        outcome: dict[str, Any] = {"stop_requested": True, "stop_error": None}
        try:
            self.client.stop_job(self.id)
        except Exception as exc:  # noqa: BLE001 - e.g. it finished meanwhile; the status tells
            outcome["stop_error"] = _one_line(f"{type(exc).__name__}: {exc}")
        t0 = time.monotonic()
        try:
            while True:
                self.refresh()
                waited = time.monotonic() - t0
                if self.terminal or waited >= (PENDING_STOP_WAIT_S if self.status == "PENDING" else wait_s):
                    break
                time.sleep(STATUS_INTERVAL_S)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the stop request stands
            outcome["stop_wait_interrupted"] = True
        outcome["stop_confirmed"] = self.terminal
        if self.status == "PENDING":
            # Ray queues the stop behind the job's supervisor actor, which waits for resources
            outcome["stop_note"] = ("Ray cannot cancel a job still waiting for resources: once it gets them it "
                                    "starts and is stopped at once, or Ray fails it after "
                                    "RAY_JOB_START_TIMEOUT_SECONDS")
        return outcome


def submit(spec: LaunchSpec, results_dir: Path, *, address: str, num_gpus: int = 0, num_cpus: float = 1,
           resources: Mapping[str, float] | None = None, poll: PollCallback | None = None,
           poll_interval_s: float = 2.0, client_factory: ClientFactory | None = None,
           pending_timeout_s: float | None = None, stop_wait_s: float = STOP_WAIT_S) -> LaunchResult:
    """Run ``spec`` as a Ray job at ``address`` to its end, the timeout, or a stop reason from ``poll``.

    ``resources``: custom resources the job asks for (``{"probe": 1}``), so Ray places it on a node that
    offers them (it stays PENDING, then times out, where none does).

    ``poll`` is called every ``poll_interval_s`` from submission on; a non-empty string it returns
    stops the job and becomes ``stopped_reason``. ``timeout_s`` counts from RUNNING; a job still
    waiting for resources after ``pending_timeout_s`` (default ``spec.timeout_s``) is stopped as
    timed out. KeyboardInterrupt and exceptions from ``poll`` propagate after the job is stopped
    and launch.json records them. An unreachable server or a refused submission is a UsageError.
    """
    if spec.uses_ray:
        raise UsageError("launch.uses_ray: the run starts a Ray cluster of its own, and its `ray stop --force` "
                         "would stop the cluster the job runs on; run it without --ray-jobs / RAY_ADDRESS")
    logs = Path(results_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stdout_log, stderr_log, launch_json = logs / "stdout.log", logs / "stderr.log", logs / "launch.json"
    stdout_log.write_bytes(b"")
    stderr_log.write_bytes(b"")
    env_vars = dict(spec.env)
    dropped = {}
    if num_gpus > 0 and "CUDA_VISIBLE_DEVICES" in env_vars:
        # a local GPU slot means nothing on the node Ray picks: Ray sets the job's own devices
        dropped["CUDA_VISIBLE_DEVICES"] = env_vars.pop("CUDA_VISIBLE_DEVICES")
    submission_id = submission_id_for(Path(results_dir))
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    url = normalize_address(address)
    ray_record: dict[str, Any] = {
        "address": url, "submission_id": submission_id, "entrypoint": entrypoint(spec),
        "runtime_env": {"env_vars": env_vars}, "entrypoint_num_gpus": num_gpus, "entrypoint_num_cpus": num_cpus,
        "entrypoint_resources": dict(resources or {}), "env_dropped": dropped, "status": None,
    }
    record: dict[str, Any] = {
        "command": spec.command, "command_line": spec.command_line, "argv": spec.argv,
        "cwd": str(spec.cwd), "env_overrides": spec.env,
        "env": "the cluster's environment plus env_overrides (runtime_env.env_vars); not the harness's",
        "timeout_s": spec.timeout_s, "uses_ray": spec.uses_ray, "cleanup_commands": [],
        "started_at": started_at, "launcher": "ray_job",
        "stderr_log": "empty: Ray writes the job's stdout and stderr together into stdout.log",
        "ray": ray_record,
    }
    write_launch_record(launch_json, record)
    try:
        client = connect(address, client_factory)
    except UsageError as exc:
        ray_record["status"] = "NOT SUBMITTED"
        record["result"] = {"error": str(exc)}
        write_launch_record(launch_json, record)
        raise
    metadata = {"rl_autotest_results_dir": str(results_dir), "rl_autotest_case": Path(results_dir).parent.name}
    t0 = time.monotonic()
    try:
        client.submit_job(entrypoint=ray_record["entrypoint"], submission_id=submission_id,
                          runtime_env={"env_vars": env_vars}, metadata=metadata,
                          entrypoint_num_gpus=num_gpus or None, entrypoint_num_cpus=num_cpus or None,
                          entrypoint_resources=dict(resources) if resources else None)
    except Exception as exc:  # noqa: BLE001 - a refused submission is the user's to fix
        ray_record["status"] = "NOT SUBMITTED"
        record["result"] = {"error": _one_line(exc)}
        write_launch_record(launch_json, record)
        raise UsageError(f"ray job at {url}: submission refused: {_one_line(exc)}; "
                         "check launch.env values and the cluster's resources") from None
    ray_record["status"] = "PENDING"
    write_launch_record(launch_json, record)
    job = _Job(client, submission_id, stdout_log)
    pending_limit = spec.timeout_s if pending_timeout_s is None else pending_timeout_s
    # stops the job if this process dies without stopping it (SIGKILL, OOM); a ray:// client address
    # has no HTTP job server to ask
    guard = (watchdog.start_for_ray_job(url, submission_id, pending_limit + spec.timeout_s, stop_wait_s,
                                        logs / "watchdog.log")
             if url.startswith(("http://", "https://")) else None)
    timed_out, stopped, interrupted, lost = False, None, None, None
    interrupt: BaseException | None = None
    running_since: float | None = None
    try:
        next_poll = t0 + poll_interval_s if poll else float("inf")
        next_logs = t0
        while True:
            job.refresh()
            now = time.monotonic()
            if running_since is None and job.status == "RUNNING":
                running_since = now
            if job.terminal:
                break
            if now >= next_logs:
                job.fetch_logs()
                next_logs = time.monotonic() + LOG_INTERVAL_S
            if job.lost_for_s() >= CONTACT_LOST_S:
                lost = f"JobServerLost: no answer from {url} for {job.lost_for_s():.0f} s: {job.last_error}"
                break
            if running_since is not None and now - running_since >= spec.timeout_s:
                timed_out = True
                break
            if running_since is None and now - t0 >= pending_limit:
                timed_out = True
                ray_record["pending_timed_out"] = (f"still PENDING after {pending_limit:g} s: "
                                                   f"{job.info.get('message')}")
                break
            if poll and now >= next_poll:
                reason = poll()
                next_poll = time.monotonic() + poll_interval_s
                if reason:
                    stopped = str(reason)
                    break
            if stop_requested():  # another thread was interrupted (calibration's runs wait in a pool)
                raise Interrupted(stop_requested() or "stop requested")
            time.sleep(STATUS_INTERVAL_S)
    except KeyboardInterrupt as exc:
        interrupted, interrupt = describe(exc), exc
    except BaseException as exc:
        interrupted = describe(exc)
        raise
    finally:
        # every ending passes here: finished, timeout, stop, lost server, Ctrl-C, a failing callback
        end = time.monotonic()
        wall_s = round(end - (running_since if running_since is not None else t0), 3)
        if not job.terminal:
            ray_record.update(job.stop(stop_wait_s))
        watchdog.stop(guard)
        job.fetch_logs()
        status = job.status
        message = job.info.get("message")
        code, sig = exit_code_of(status, message, job.info.get("driver_exit_code"))
        if status == "STOPPED" and not (timed_out or stopped or interrupted or lost):
            stopped = f"Ray job {submission_id} was stopped outside the harness: {message}"
        ray_record.update(
            status=status, message=(message or "")[:MESSAGE_CHARS] or None, error_type=job.info.get("error_type"),
            driver_exit_code=job.info.get("driver_exit_code"), driver_node_id=job.info.get("driver_node_id"),
            pending_s=round((running_since if running_since is not None else end) - t0, 3),
            contact_errors=job.contact_errors, last_contact_error=job.last_error)
        result = LaunchResult(
            command_line=spec.command_line, cwd=str(spec.cwd), started_at=started_at, wall_s=wall_s,
            timeout_s=spec.timeout_s, exit_code=code, signal=sig, timed_out=timed_out, stopped_reason=stopped,
            interrupted=interrupted or lost, stdout_log=stdout_log, stderr_log=stderr_log, launch_json=launch_json)
        result = final_launch_record(launch_json, record, result)
    if interrupt is not None:
        raise RunInterrupted(interrupted or "interrupted", result) from interrupt
    return result
