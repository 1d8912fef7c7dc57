"""Ray job submission against a real local Ray head (no mocks): one small head for the module."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.proctable import descendants, process_table
from autotest.run.ray_job import submit
from tests.unit.run.test_ray_job import run_dir, spec_for
from tests import waits

REPO = Path(__file__).resolve().parents[3]
RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
START_TIMEOUT_S = 120.0  # of the head's processes' own time (tests/waits.py): ~10 s of it; load only adds waits


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _cluster_pids(session: int, temp_dir: str) -> set[int]:
    """Our head's processes: its session, anything naming its temp dir, and their descendants
    (workers and job drivers start sessions of their own)."""
    found = set()
    for proc in process_table():
        try:
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if proc.session == session or temp_dir in cmdline:
            found.add(proc.pid)
    for pid in list(found):
        found.update(descendants(pid))
    return {pid for pid in found if alive(pid)}


def _stop_cluster(session: int, temp_dir: str) -> set[int]:
    """SIGTERM, then SIGKILL, exactly our head's processes. `ray stop --force` is not used: it
    kills every Ray process of this user on the machine, other people's clusters included."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        for pid in _cluster_pids(session, temp_dir):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while _cluster_pids(session, temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
    return _cluster_pids(session, temp_dir)


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A local Ray head with its own ports and temp dir; its job server's HTTP address."""
    if RAY is None:
        pytest.skip("the ray CLI is not installed: pip install 'rl-autotest[workloads]'")
    temp_dir = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's socket paths have a limit
    dashboard = free_port()
    ports = {"--port": free_port(), "--dashboard-port": dashboard,
             "--dashboard-agent-listen-port": free_port(), "--dashboard-agent-grpc-port": free_port(),
             "--ray-client-server-port": free_port(), "--runtime-env-agent-port": free_port(),
             "--metrics-export-port": free_port(), "--node-manager-port": free_port(),
             "--object-manager-port": free_port()}
    argv = [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1",
            "--include-dashboard", "true", "--temp-dir", temp_dir, "--num-cpus", "2", "--resources", '{"probe": 1}',
            "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats"]
    for flag, port in ports.items():
        argv += [flag, str(port)]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    address = f"http://127.0.0.1:{dashboard}"
    t0 = time.monotonic()
    # a session of its own: every daemon `ray start` leaves behind stays in it, so we find them all
    starter = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = waits.communicate(starter, START_TIMEOUT_S)
        assert starter.returncode == 0, out.decode(errors="replace")[-3000:]

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"{address}/api/version", timeout=5) as response:
                    json.loads(response.read())
            except OSError:
                return False
            return True

        waits.until(answers, START_TIMEOUT_S, pids=lambda: sorted(_cluster_pids(starter.pid, temp_dir)),
                    what=f"job server at {address} never answered")
        print(f"\nray head up in {time.monotonic() - t0:.1f} s at {address}")
        yield address
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        left = _stop_cluster(starter.pid, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"Ray processes of this test's head still alive: {sorted(left)}"


def launch_record(result) -> dict:
    return json.loads(result.launch_json.read_text())


# ---------------------------------------------------------------- without a cluster


def test_unreachable_address_is_one_line_usage_error(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(UsageError) as info:
        submit(spec_for(tmp_path, "print(1)"), run_dir(tmp_path), address=f"127.0.0.1:{port}")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach Ray job server at http://127.0.0.1:{port}: ")
    assert "ray start --head --dashboard-host 127.0.0.1" in message
    record = json.loads((run_dir(tmp_path) / "logs" / "launch.json").read_text())
    assert record["ray"]["status"] == "NOT SUBMITTED" and "cannot reach" in record["result"]["error"]


# ---------------------------------------------------------------- against the local head


def test_quick_command_succeeds_with_its_output_in_stdout_log(ray_head: str, tmp_path: Path) -> None:
    results = run_dir(tmp_path)
    result = submit(spec_for(tmp_path, "print('hello from the ray job'); import sys; print('err', file=sys.stderr)"),
                    results, address=ray_head)
    assert (result.exit_code, result.signal, result.timed_out, result.stopped_reason) == (0, None, False, None)
    log = result.stdout_log.read_text()
    assert "hello from the ray job" in log and "err" in log  # Ray merges stderr into the one log
    assert result.stderr_log.read_text() == ""
    record = launch_record(result)
    ray = record["ray"]
    assert ray["status"] == "SUCCEEDED" and ray["driver_exit_code"] == 0
    assert ray["submission_id"].startswith("rl-autotest-unit-case-20260101-000000-pid1-")
    assert ray["address"] == ray_head and ray["entrypoint"].startswith(f"cd {tmp_path} && exec ")
    assert "empty" in record["stderr_log"] and record["result"]["exit_code"] == 0


def test_failing_command_is_failed_with_its_exit_code(ray_head: str, tmp_path: Path) -> None:
    result = submit(spec_for(tmp_path, "print('about to fail'); raise SystemExit(3)"), run_dir(tmp_path),
                    address=ray_head)
    assert (result.exit_code, result.signal, result.timed_out) == (3, None, False)
    ray = launch_record(result)["ray"]
    assert ray["status"] == "FAILED" and "exit code 3" in ray["message"]
    assert "about to fail" in result.stdout_log.read_text()


def test_env_vars_and_cwd_reach_the_job_and_the_explicit_address_wins(
        ray_head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ray's client would otherwise prefer RAY_ADDRESS to the address it is given
    monkeypatch.setenv("RAY_ADDRESS", f"http://127.0.0.1:{free_port()}")
    work = tmp_path / "work dir"
    work.mkdir()
    code = "import os; print('probe=' + os.environ['AUTOTEST_RAY_PROBE']); print('cwd=' + os.getcwd())"
    result = submit(spec_for(work, code, env={"AUTOTEST_RAY_PROBE": "xyz 42"}), run_dir(tmp_path), address=ray_head)
    assert result.exit_code == 0, result.stdout_log.read_text()
    log = result.stdout_log.read_text()
    assert "probe=xyz 42" in log and f"cwd={work}" in log


def test_timeout_stops_the_job(ray_head: str, tmp_path: Path) -> None:
    # the job leaves its pid in a file, so a job that starts only after a slow (loaded) submission is checked too
    code = ("import os, time; open('job.pid', 'w').write(str(os.getpid())); print('pid', os.getpid(), flush=True); "
            "time.sleep(600)")
    # the job sleeps 600 s: only the 6 s timeout can end it (a busy machine makes the stop later, never earlier)
    result = submit(spec_for(tmp_path, code, timeout_s=6.0), run_dir(tmp_path), address=ray_head)
    assert result.timed_out and result.exit_code is None and result.stopped_reason is None
    assert result.wall_s >= 6.0
    ray = launch_record(result)["ray"]
    assert ray["status"] == "STOPPED" and ray["stop_confirmed"] is True
    pid_file = tmp_path / "job.pid"

    def job_alive() -> bool:
        text = pid_file.read_text() if pid_file.exists() else ""
        return not text or alive(int(text))  # not started yet counts as alive: it must not start late either

    # Ray's processes do the stopping (not ours to measure): the wait is stretched by the load per core
    waits.until(lambda: not job_alive(), 10, what="the job's process outlived the stop")


def test_poll_stop_reason_stops_the_job_and_the_log_grows_while_it_runs(ray_head: str, tmp_path: Path) -> None:
    code = """
    import time
    for i in range(600):
        print(f'tick {i}', flush=True)
        time.sleep(0.2)
    """
    results = run_dir(tmp_path)
    seen: list[str] = []

    def poll() -> str | None:
        log = (results / "logs" / "stdout.log").read_text()
        seen.append(log)
        return "enough ticks" if "tick 10" in log else None

    result = submit(spec_for(tmp_path, code), results, address=ray_head, poll=poll, poll_interval_s=0.5)
    assert result.stopped_reason == "enough ticks" and not result.timed_out and result.exit_code is None
    assert launch_record(result)["ray"]["status"] == "STOPPED"
    assert any("tick 10" in s for s in seen)  # streamed: the file had it while the job still ran
    assert "tick 599" not in result.stdout_log.read_text()


def test_a_job_waiting_for_resources_is_stopped_after_the_pending_timeout(ray_head: str, tmp_path: Path) -> None:
    # the head has no GPU: a job that needs one stays PENDING
    result = submit(spec_for(tmp_path, "print('never runs')"), run_dir(tmp_path), address=ray_head, num_gpus=1,
                    pending_timeout_s=3.0)
    # it can never run (no GPU): the pending timeout, named below, is what ended it
    assert result.timed_out and result.exit_code is None
    ray = launch_record(result)["ray"]
    assert ray["pending_timed_out"].startswith("still PENDING after 3 s: ")
    assert "waiting for resources" in ray["pending_timed_out"] and ray["entrypoint_num_gpus"] == 1
    # Ray has no way to cancel a job before it is scheduled: recorded, not waited on for a minute
    assert ray["status"] == "PENDING" and ray["stop_requested"] and ray["stop_confirmed"] is False
    assert "cannot cancel" in ray["stop_note"]
    assert "never runs" not in result.stdout_log.read_text()


def test_a_job_asks_for_custom_resources_and_runs_only_where_they_are(ray_head: str, tmp_path: Path) -> None:
    # the head offers probe=1: a job asking for it runs; one asking for a resource no node has waits
    placed = submit(spec_for(tmp_path, "print('on the probe node')"), run_dir(tmp_path / "a"), address=ray_head,
                    resources={"probe": 1.0})
    assert placed.exit_code == 0 and "on the probe node" in placed.stdout_log.read_text()
    assert launch_record(placed)["ray"]["entrypoint_resources"] == {"probe": 1.0}
    nowhere = submit(spec_for(tmp_path, "print('never runs')"), run_dir(tmp_path / "b"), address=ray_head,
                     resources={"gpu_node": 1.0}, pending_timeout_s=3.0)
    assert nowhere.timed_out and "waiting for resources" in launch_record(nowhere)["ray"]["pending_timed_out"]
    assert "never runs" not in nowhere.stdout_log.read_text()


def test_keyboard_interrupt_stops_the_job_and_propagates(ray_head: str, tmp_path: Path) -> None:
    results = run_dir(tmp_path)

    def poll() -> str | None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        submit(spec_for(tmp_path, "import time; time.sleep(600)"), results, address=ray_head, poll=poll,
               poll_interval_s=0.5)
    record = json.loads((results / "logs" / "launch.json").read_text())
    assert record["ray"]["status"] == "STOPPED" and record["ray"]["stop_confirmed"] is True
    assert record["result"]["interrupted"] == "KeyboardInterrupt"


def test_sigkill_of_the_harness_stops_the_job(ray_head: str, tmp_path: Path) -> None:
    # a harness process of its own that submits a job and waits on it; then SIGKILL: no finally runs
    results = run_dir(tmp_path)
    pid_file = tmp_path / "job.pid"
    job_code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    harness_code = (f"from pathlib import Path; from autotest.run.ray_job import submit; "
                    f"from tests.unit.run.test_ray_job import spec_for; "
                    f"submit(spec_for(Path({str(tmp_path)!r}), {job_code!r}, timeout_s=600.0), "
                    f"Path({str(results)!r}), address={ray_head!r})")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    harness = subprocess.Popen([sys.executable, "-c", harness_code], cwd=REPO, env=env)
    try:
        def job_started() -> bool:
            assert harness.poll() is None, "the harness ended before the job ran"
            return pid_file.exists() and pid_file.read_text() != ""

        # the job runs in Ray's processes, not the harness's tree: stretched by the load per core
        waits.until(job_started, 120, what="the job did not start")
        job_pid = int(pid_file.read_text())
        harness.kill()
        waits.wait(harness, 30)
        t0 = time.monotonic()
        watchdog_log = results / "logs" / "watchdog.log"
        waits.until(lambda: not alive(job_pid) and " stopped" in watchdog_log.read_text(), 30,
                    what="the job's process outlived the harness by 30 s (times the load per core)")
        log = watchdog_log.read_text()
        assert "is gone: stopping Ray job rl-autotest-unit-case-" in log and " stopped" in log, log
        submission_id = json.loads((results / "logs" / "launch.json").read_text())["ray"]["submission_id"]
        with urllib.request.urlopen(f"{ray_head}/api/jobs/{submission_id}", timeout=10) as response:
            assert json.loads(response.read())["status"] == "STOPPED"
        print(f"job process gone {time.monotonic() - t0:.1f} s after the harness's SIGKILL")
    finally:
        harness.kill()
        harness.wait()


# ---------------------------------------------------------------- the tiny case end to end


@pytest.mark.slow
def test_tiny_grpo_runs_as_a_ray_job(ray_head: str, tmp_path: Path) -> None:
    from autotest.inputs.case import load_case
    from autotest.readers.reading import read_trace
    from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case

    case = load_case("tiny-grpo")
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path / "results", ray_address=ray_head),
                                    publish=PublishOptions(with_plots=False)))
    assert run.results_dir is not None and run.verdict is not None, run.summary_line()
    record = json.loads((run.results_dir / "logs" / "launch.json").read_text())
    assert record["ray"]["status"] == "SUCCEEDED", record["ray"]
    completion = next((r for r in run.verdict.results if r.check_id == "run[completion]"), None)
    assert completion is not None and completion.status == "PASS", run.summary_line()
    tracker = run.results_dir / "tracker.jsonl"
    trace = read_trace(tracker, "xtuner")
    assert trace.last_train_step == 45 and len(trace.train_steps) == 45
