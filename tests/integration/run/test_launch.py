"""Launcher: real processes throughout (children and background grandchildren of sys.executable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, load_case
from autotest.judge.structural import completion_status
from autotest.run.artifacts import artifacts_for, collect_artifacts
from autotest.run.launch import LaunchSpec, launch_spec
from autotest.run.process_group import launch
from tests import waits

# A child that starts a background grandchild, prints the grandchild's pid, then sleeps.
GRANDCHILD = """
import os, signal, subprocess, sys, time
kid = {kid!r}
p = subprocess.Popen([sys.executable, '-c', kid])
print(p.pid, flush=True)
time.sleep({parent_sleep})
"""
SLEEPER = "import time; time.sleep(600)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
OWN_GROUP = "import os, time; os.setpgid(0, 0); time.sleep(600)"


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", textwrap.dedent(code))


def spec(tmp_path: Path, code: str, **kw: object) -> LaunchSpec:
    base: dict = {"command": py(code), "cwd": tmp_path, "env": {}, "timeout_s": 30.0, "term_grace_s": 2.0}
    return LaunchSpec(**{**base, **kw})


#: a run the harness times out sleeps 600 s (it never finishes), but must first print its children's pids: a
#: start-up of ~0.1 s of CPU, which this timeout leaves room for at load 20 on 2 cores
TIMES_OUT_AFTER_S = 5.0


def printed_pids(stdout_log: Path) -> list[int]:
    return [int(word) for word in (stdout_log.read_text() if stdout_log.exists() else "").split()]


def grandchild_pid(stdout_log: Path, proc: subprocess.Popen | None = None) -> int:
    """The pid the run printed; with ``proc`` (a harness still running) waits for it on that harness's own time
    (tests/waits.py), else the run is over and its log complete."""
    if proc is not None:
        waits.until(lambda: printed_pids(stdout_log), 20, proc=proc, what=f"no pid in {stdout_log}")
    assert printed_pids(stdout_log), f"no pid in {stdout_log}"
    return printed_pids(stdout_log)[0]


def test_exit_code_logs_and_launch_json(tmp_path: Path) -> None:
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(3)"
    secret = "hf_" + "Zq7" * 10
    result = launch(spec(tmp_path, code, env={"HF_TOKEN": secret, "RL_T_VISIBLE": "yes"}), tmp_path / "res")
    assert (result.exit_code, result.signal, result.timed_out, result.stopped_reason) == (3, None, False, None)
    assert result.stdout_log.read_text() == "to stdout\n"
    assert result.stderr_log.read_text() == "to stderr\n"
    assert result.stdout_log == tmp_path / "res" / "logs" / "stdout.log"
    record = json.loads(result.launch_json.read_text())
    assert record["argv"] == list(py(code)) and record["cwd"] == str(tmp_path)
    assert record["env_overrides"] == {"HF_TOKEN": "***", "RL_T_VISIBLE": "yes"}
    assert secret not in result.launch_json.read_text()
    assert record["result"]["exit_code"] == 3 and record["result"]["wall_s"] > 0
    status = completion_status(result, 2, 45, True)
    assert status.status == "ERROR" and status.reasons == ("run exited with code 3 at step 2 of 45",)


def test_child_sees_env_overrides_and_cwd(tmp_path: Path) -> None:
    code = "import os; print(os.environ['RL_T_X'], os.getcwd(), os.environ.get('PATH') is not None)"
    result = launch(spec(tmp_path, code, env={"RL_T_X": "42"}), tmp_path / "res")
    assert result.stdout_log.read_text() == f"42 {tmp_path} True\n"


def test_string_command_runs_in_bash(tmp_path: Path) -> None:
    result = launch(spec(tmp_path, "", command="echo $((1 + 2)) | cat && exit 4"), tmp_path / "res")
    assert result.exit_code == 4 and result.stdout_log.read_text() == "3\n"


def test_killed_by_signal(tmp_path: Path) -> None:
    result = launch(spec(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), tmp_path / "r")
    assert (result.exit_code, result.signal) == (None, "SIGKILL")
    assert completion_status(result, None, 45, True).reasons == (
        "run was killed by SIGKILL before any step was logged (expected 45)",)


def test_command_that_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^launch: could not start '/nonexistent/train' in "):
        launch(spec(tmp_path, "", command=("/nonexistent/train",)), tmp_path / "res")
    assert "could not start" in (tmp_path / "res" / "logs" / "launch.json").read_text()


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    code = GRANDCHILD.format(kid=SLEEPER, parent_sleep=600)
    result = launch(spec(tmp_path, code, timeout_s=TIMES_OUT_AFTER_S), tmp_path / "res")
    kid = grandchild_pid(result.stdout_log)
    assert result.timed_out and result.signal == "SIGTERM" and result.exit_code is None
    assert not alive(kid) and result.survivors == ()
    assert result.wall_s >= TIMES_OUT_AFTER_S - 0.1  # not before its time (a busy machine only makes it later)
    assert completion_status(result, 7, 45, True).reasons == ("run timed out after 5 s at step 7 of 45",)


def test_sigterm_ignored_and_own_group_escalate_to_sigkill(tmp_path: Path) -> None:
    code = f"""
import subprocess, sys, time
a = subprocess.Popen([sys.executable, '-c', {STUBBORN!r}])
b = subprocess.Popen([sys.executable, '-c', {OWN_GROUP!r}])
print(a.pid, b.pid, flush=True)
time.sleep(600)
"""
    result = launch(spec(tmp_path, code, timeout_s=TIMES_OUT_AFTER_S, term_grace_s=0.5), tmp_path / "res")
    pids = printed_pids(result.stdout_log)
    assert len(pids) == 2 and result.timed_out
    assert not any(alive(p) for p in pids) and result.survivors == ()


def test_descendant_that_left_the_session_is_killed(tmp_path: Path) -> None:
    """Like a teacher server started with setsid: outside the group, still the run's process."""
    code = f"""
import subprocess, sys, time
p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], start_new_session=True)
print(p.pid, flush=True)
time.sleep(600)
"""
    result = launch(spec(tmp_path, code, timeout_s=TIMES_OUT_AFTER_S, term_grace_s=0.5), tmp_path / "res")
    kid = grandchild_pid(result.stdout_log)
    assert result.timed_out and result.escaped_pids == (kid,)
    assert not alive(kid) and result.survivors == ()


def test_leftover_processes_after_a_normal_exit_are_killed(tmp_path: Path) -> None:
    result = launch(spec(tmp_path, GRANDCHILD.format(kid=SLEEPER, parent_sleep=0)), tmp_path / "res")
    kid = int(result.stdout_log.read_text())
    assert result.exit_code == 0 and result.leftover_pids == (kid,)
    assert not alive(kid)


def test_poll_callback_stops_the_run(tmp_path: Path) -> None:
    calls: list[float] = []
    breached_at: list[int] = []

    def poll() -> str | None:
        calls.append(time.monotonic())
        # from the third look on, once the run has printed its child's pid (late on a busy machine)
        if len(calls) >= 3 and printed_pids(tmp_path / "res" / "logs" / "stdout.log"):
            breached_at.append(len(calls))
            return "mismatch/mismatch_k3_kl breached at step 3"
        return None

    code = GRANDCHILD.format(kid=SLEEPER, parent_sleep=600)
    # the run sleeps 600 s and only the poll can stop it within the 600 s timeout
    result = launch(spec(tmp_path, code, timeout_s=600.0), tmp_path / "res", poll=poll, poll_interval_s=0.2)
    assert breached_at == [len(calls)] and result.stopped_reason == "mismatch/mismatch_k3_kl breached at step 3"
    assert not result.timed_out
    assert not alive(grandchild_pid(result.stdout_log))
    assert completion_status(result, 3, 45, True).reasons == (
        "run stopped by the harness at step 3 of 45: mismatch/mismatch_k3_kl breached at step 3",)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_exception_in_callback_still_cleans_up(tmp_path: Path, error: BaseException) -> None:
    marker = tmp_path / "cleanup-ran"
    cleanup = py(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('done')")

    def poll() -> str | None:
        raise error

    code = GRANDCHILD.format(kid=SLEEPER, parent_sleep=600)
    the_spec = spec(tmp_path, code, cleanup_commands=(cleanup,))
    with pytest.raises(type(error)):
        launch(the_spec, tmp_path / "res", poll=poll, poll_interval_s=0.5)
    logs = tmp_path / "res" / "logs"
    assert not alive(grandchild_pid(logs / "stdout.log"))
    assert marker.read_text() == "done"
    record = json.loads((logs / "launch.json").read_text())
    assert record["result"]["interrupted"] == ("RuntimeError: boom" if isinstance(error, RuntimeError)
                                               else "KeyboardInterrupt")


def test_ctrl_c_at_the_harness_kills_the_run(tmp_path: Path) -> None:
    """A real SIGINT to a harness process that is waiting in launch()."""
    results = tmp_path / "res"
    harness = f"""
import sys
from pathlib import Path
from autotest.run.launch import LaunchSpec
from autotest.run.process_group import launch
code = {GRANDCHILD.format(kid=SLEEPER, parent_sleep=600)!r}
launch(LaunchSpec(command=(sys.executable, '-c', code), cwd=Path({str(tmp_path)!r}), env={{}},
                  timeout_s=60, term_grace_s=2), Path({str(results)!r}))
"""
    proc = subprocess.Popen([sys.executable, "-c", harness], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kid = grandchild_pid(results / "logs" / "stdout.log", proc)
    assert alive(kid)
    proc.send_signal(signal.SIGINT)
    _, err = waits.communicate(proc, 30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert not alive(kid)
    record = json.loads((results / "logs" / "launch.json").read_text())
    assert record["result"]["interrupted"] == "KeyboardInterrupt"


def test_cleanup_commands_run_with_the_runs_env(tmp_path: Path) -> None:
    out = tmp_path / "seen"
    # a shell one-liner (milliseconds of CPU) where a Python start-up could outlast the limit on a busy machine;
    # the second command never finishes, so only the limit ends it
    ok = ("sh", "-c", 'printf "%s %s" "$RL_T_RUN" "$(pwd -P)" > "$1"', "sh", str(out))
    hang = py("import time; time.sleep(600)")
    the_spec = spec(tmp_path, "pass", env={"RL_T_RUN": "run-7"}, cleanup_timeout_s=2.0,
                    cleanup_commands=(ok, hang, ("/nonexistent/ray", "stop", "--force")))
    result = launch(the_spec, tmp_path / "res")
    assert out.read_text() == f"run-7 {tmp_path}"
    first, second, third = result.cleanup
    assert (first.exit_code, first.timed_out, first.error) == (0, False, None)
    assert second.timed_out and second.error == "timed out after 2 s"
    assert third.exit_code is None and third.error is not None and third.error.startswith("could not start")
    log = (tmp_path / "res" / "logs" / "cleanup.log").read_text()
    assert "$ /nonexistent/ray stop --force" in log


def last_step(tracker: Path) -> int | None:
    steps = [json.loads(line)["step"] for line in tracker.read_text().splitlines() if line.strip()]
    return max(steps) if steps else None


def test_exit_zero_with_fewer_steps_is_incomplete(tmp_path: Path) -> None:
    """A run behind a pipeline: the trainer dies at step 30, tee keeps the exit code 0."""
    work = tmp_path / "work"
    trainer = ("import json, os, pathlib, sys; d = pathlib.Path(os.environ['WORK_DIR']) / '20990101000000' / "
               "'logs' / 'exp_tracking'; d.mkdir(parents=True); f = (d / 'tracker.jsonl').open('w'); "
               "[f.write(json.dumps({'step': s}) + chr(10)) for s in range(1, 31)]; f.close(); "
               "sys.exit('CUDA error: an illegal memory access was encountered')")
    command = f"{sys.executable} -c \"{trainer}\" 2>&1 | tee -a train.log"
    t0 = time.time()
    result = launch(spec(tmp_path, "", command=command, env={"WORK_DIR": str(work)}), tmp_path / "res")
    found = collect_artifacts(work, tmp_path / "res", since=t0)
    assert result.exit_code == 0 and "illegal memory access" in result.stdout_log.read_text()
    status = completion_status(result, last_step(found.tracker), 45, True)
    assert not status.complete and status.status == "ERROR"
    assert status.reasons == ("run ended at step 30 of 45 with exit code 0 (a pipeline may hide a crash)",)


def test_real_tiny_grpo_run_cut_short(tmp_path: Path) -> None:
    """The embedded workload through the whole path: spec, launch, artifacts, completion."""
    case = load_case("tiny-grpo")
    work = tmp_path / "work"
    the_spec = launch_spec(case, work, seed=1, extra_args=("--steps", "3"), environ={})
    t0 = time.time()
    result = launch(the_spec, tmp_path / "res")
    found = artifacts_for(case, work, tmp_path / "res", since=t0, environ={})
    assert result.exit_code == 0, result.stderr_log.read_text()[-2000:]
    assert found.tracker is not None and found.exp_dir is not None and found.exp_dir.parent == work.resolve()
    assert any(p.name == "config.json" for p in found.run_config)
    status = completion_status(result, last_step(found.tracker), case.expected.steps, case.expected.exact_steps)
    assert status.reasons == ("run ended at step 3 of 45 with exit code 0 (a pipeline may hide a crash)",)
    assert os.environ.get("WORK_DIR") != str(work.resolve())  # set for the child only
