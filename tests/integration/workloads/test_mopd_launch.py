"""The tiny-mopd launch lifecycle with real processes: servers up on free ports, endpoints exported,
training run, and every process gone afterwards, whatever the ending (exit, early death, timeout,
SIGTERM, SIGKILL of the launcher itself)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.mopd import ACCEPTED_FAULTS  # noqa: E402
from autotest.workloads.mopd_launch import TEACHER_FAULTS  # noqa: E402
from autotest.workloads.teacher_client import ENDPOINTS_ENV  # noqa: E402
from autotest.workloads.teachers import Fixture  # noqa: E402
from tests import waits  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
EVAL_KEYS = {"eval/digit_sum/acc", "eval/digit_product/acc", "eval/score"}
SUMMARY_KEYS = {"distillation/reduced_distillation_kl", "distillation/reduced_distillation_abs_loss",
                "distillation/opd_reverse_kl", "distillation/opd_abs_logprob_loss", "response/rewards/mean",
                "response/response_len/mean", "time/step", "mismatch/mismatch_k3_kl", "entropy/mean",
                "distillation/teacher_kl/digit_sum_teacher", "distillation/teacher_kl/digit_product_teacher",
                "memory/rss_mb", "memory/peak_rss_mb"}


def processes_mentioning(marker: str) -> list[str]:
    """Live processes whose command line or environment contains ``marker`` (a run's work dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue  # gone, or not ours to read
        if marker in cmdline or marker in environ:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def assert_nothing_left(marker: str | Path, wait_s: float = 10.0) -> None:
    """No process of the run survives (allowing the ones still there ``wait_s`` of their own time, waits for a
    CPU not counted, for exits already under way: a healthy exit takes about a second of it)."""
    def left_pids() -> list[int]:
        return [int(line.split(":", 1)[0]) for line in processes_mentioning(str(marker))]

    waits.until(lambda: not processes_mentioning(str(marker)), wait_s, pids=left_pids,
                what=lambda: f"processes left behind: {processes_mentioning(str(marker))}")


def launcher(work: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "autotest.workloads.mopd_launch", "--work-dir", str(work), *args]


def tracker_rows(work: Path) -> list[dict]:
    (path,) = work.glob("*/logs/exp_tracking/tracker.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def exported_endpoints(stdout: str) -> dict[str, list[str]]:
    (line,) = [line for line in stdout.splitlines() if line.startswith(f"[mopd-launch] {ENDPOINTS_ENV}=")]
    return json.loads(line.split("=", 1)[1])


def port_file_urls(work: Path) -> dict[str, str]:
    return {p.name.rsplit("-", 1)[0]: f"http://127.0.0.1:{json.loads(p.read_text())['port']}"
            for p in (work / "teachers").glob("*.port")}


# a real tiny-mopd launch with its teacher servers (20-35 s each on 2 cores; the first also trains the
# teachers once per session, ~100 s): out of the quick tier, `pytest -m "not slow"`
@pytest.mark.slow
def test_a_short_run_end_to_end(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    work = tmp_path / "work"
    done = waits.run(launcher(work, "--steps", "5", "--seed", "3"), 300, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the log names the fixture's weights bit for bit (a baseline holds for one fixture)
    weights = ", ".join(f"{name} {digest[:12]}" for name, digest in mopd_cache_env.weights().items())
    assert f"[mopd-launch] fixture {mopd_cache_env.root}: weights sha256 {weights}\n" in done.stdout
    # the endpoints, in xtuner's shape, on loopback ports the kernel picked
    endpoints = exported_endpoints(done.stdout)
    assert endpoints == {name: [url] for name, url in port_file_urls(work).items()}
    assert set(endpoints) == {"digit_sum_teacher", "digit_product_teacher"}
    assert len({urls[0] for urls in endpoints.values()}) == 2
    assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+", urls[0]) for urls in endpoints.values())
    # the metric log: eval-only row at step 0, per step mini-batch rows then the summary, eval at 5
    rows = tracker_rows(work)
    assert rows[0]["step"] == 0 and set(rows[0]) == EVAL_KEYS | {"step"}
    summaries = [r for r in rows[1:] if not any(k.startswith("train_metrics/") for k in r)]
    assert [r["step"] for r in summaries] == [1, 2, 3, 4, 5]
    assert len(rows) == 1 + 5 * (4 + 1)
    for row in summaries:
        assert SUMMARY_KEYS <= set(row), SUMMARY_KEYS - set(row)
        assert row["distillation/opd_reverse_kl"] == row["distillation/reduced_distillation_kl"]
        assert row["distillation/opd_abs_logprob_loss"] == row["distillation/reduced_distillation_abs_loss"]
        assert row["distillation/reduced_distillation_abs_loss"] >= abs(row["distillation/reduced_distillation_kl"])
        assert 0.0 <= row["response/rewards/mean"] <= 1.0
    assert EVAL_KEYS <= set(summaries[-1]) and not EVAL_KEYS & set(summaries[0])
    # both teachers scored every step; the servers and the training are gone
    for name in endpoints:
        log = (work / "teachers" / f"{name}-0.log").read_text()
        assert all(f"step {s}: " in log for s in range(1, 6)), log
    assert "[mopd-launch] stopped 2 teacher server(s)" in done.stdout
    assert_nothing_left(work)


@pytest.mark.slow
def test_teacher_swap_exports_each_teacher_under_the_other_name(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    work = tmp_path / "work"
    done = waits.run(launcher(work, "--steps", "1", "--fault", "teacher-swap"), 300, cwd=REPO, capture_output=True,
                     text=True)
    assert done.returncode == 0, done.stderr
    urls = port_file_urls(work)
    assert exported_endpoints(done.stdout) == {"digit_sum_teacher": [urls["digit_product_teacher"]],
                                               "digit_product_teacher": [urls["digit_sum_teacher"]]}
    assert_nothing_left(work)


@pytest.mark.slow
def test_a_server_that_dies_before_ready_fails_the_launch_at_once(
        tmp_path: Path, mopd_fixture: Fixture) -> None:
    broken = tmp_path / "fixture"
    shutil.copytree(mopd_fixture.root, broken)
    (broken / "digit_product_teacher" / "model.safetensors").write_bytes(b"not a checkpoint")
    work = tmp_path / "work"
    # "at once": with an hour of readiness time, only the death itself can end the launch within the 300 s
    done = waits.run(launcher(work, "--fixture", str(broken), "--ready-timeout-s", "3600"), 300, cwd=REPO,
                     capture_output=True, text=True)
    assert done.returncode == 1
    log = work / "teachers" / "digit_product_teacher-0.log"
    assert re.search(rf"^\[mopd-launch\] ERROR: teacher server 'digit_product_teacher' \(replica 0, pid \d+\) "
                     rf"exited with code 1 before becoming ready; its log: {re.escape(str(log))}$",
                     done.stderr, re.MULTILINE), done.stderr
    assert "Traceback" in log.read_text() and "    | " in done.stderr  # the log's tail is shown too
    assert not list(work.glob("[0-9]*")), "training must not start"
    assert_nothing_left(work)


@pytest.mark.slow
def test_a_server_not_ready_in_time_fails_naming_it(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    # 0.05 s of a server's own time cannot make it ready on any machine: importing torch alone takes more than ten
    # times that, and readiness is a scored request; so the limit, not the machine's speed, decides this launch
    work = tmp_path / "work"
    done = waits.run(launcher(work, "--ready-timeout-s", "0.05"), 300, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1
    assert re.search(r"ERROR: teacher server '\w+' \(replica 0, pid \d+\) did not become ready within 0.05 s "
                     r"\(\d+ s of its own time \(\d+ s wall, \d+ s of it waiting for a CPU\)\); "
                     rf"its log: {re.escape(str(work))}/teachers/\w+-0\.log", done.stderr), done.stderr
    assert not list(work.glob("[0-9]*")), "training must not start"
    assert_nothing_left(work)


def _start_hanging_run(work: Path, out: Path) -> subprocess.Popen:
    """A launcher whose training hangs at step 2; returns once step 1 is in the tracker."""
    with out.open("wb") as sink:
        proc = subprocess.Popen(launcher(work, "--fault", "hang-at:2"), cwd=REPO, stdout=sink,
                                stderr=subprocess.STDOUT, process_group=0)

    def step_one_logged() -> bool:
        trackers = list(work.glob("*/logs/exp_tracking/tracker.jsonl"))
        return bool(trackers) and any(json.loads(line)["step"] == 1 for line in trackers[0].read_text().splitlines())

    # 240 s of the launcher's tree's own time: teachers up and one step take ~40 s of it
    waits.until(step_one_logged, 240, proc=proc, what=out.read_text)
    return proc


@pytest.mark.slow
def test_sigterm_to_the_launcher_stops_training_and_servers(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    work = tmp_path / "work"
    proc = _start_hanging_run(work, tmp_path / "out.log")
    assert len(processes_mentioning(str(work))) == 4  # launcher, two servers, training
    proc.send_signal(signal.SIGTERM)
    assert waits.wait(proc, 60) == 128 + signal.SIGTERM
    text = (tmp_path / "out.log").read_text()
    assert "stopping the training process" in text and "stopped 2 teacher server(s)" in text
    assert_nothing_left(work, wait_s=2.0)


@pytest.mark.slow
def test_sigkill_of_the_launcher_leaves_nothing_behind(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    work = tmp_path / "work"
    proc = _start_hanging_run(work, tmp_path / "out.log")
    proc.kill()  # no cleanup code runs: servers and training must notice on their own
    proc.wait()
    assert_nothing_left(work, wait_s=10.0)


@pytest.mark.parametrize("fault, message", [
    ("nope", "--fault: unknown fault 'nope' for tiny-mopd; choose one of "
             f"{', '.join((*TEACHER_FAULTS, *ACCEPTED_FAULTS))}"),
    ("teacher-dies", "--fault teacher-dies: needs the step the first teacher dies at, e.g. teacher-dies:3 (got '')"),
    ("teacher-swap:2", "--fault teacher-swap: takes no argument (got '2')"),
])
def test_a_bad_fault_is_one_line(tmp_path: Path, fault: str, message: str) -> None:
    done = waits.run(launcher(tmp_path, "--fault", fault), 60, cwd=REPO, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (2, f"error: {message}\n")
