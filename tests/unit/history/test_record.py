"""Reading a results folder into a RunRecord, and every way a folder can be bad."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.history.record import (
    find_results_folders,
    read_results_folder,
    summarise_series,
)
from tests.unit.history.builders import REWARDS, STEP_TIME, write_results_folder


def test_a_nightly_folder_is_read_with_commits_hardware_checks_and_summaries(tmp_path) -> None:
    folder = write_results_folder(tmp_path, "c", 3, {REWARDS: 0.05, STEP_TIME: 2.0})
    record = read_results_folder(folder)
    assert (record.case, record.status, record.started_at) == ("c", "FAIL", "2026-01-04T02:00:00+00:00")
    assert record.harness_sha == "a" * 40 and record.framework_branch == "main" and record.framework_dirty is False
    assert record.hardware == "8x NVIDIA H200, driver 560.35, cuda 12.6, 16 CPUs, x86_64"
    assert [(c.check_id, c.status, c.observed, c.threshold) for c in record.checks] == [
        ("steps[count]", "PASS", 10.0, None), (REWARDS, "PASS", 0.05, 0.19), (STEP_TIME, "FAIL", 2.0, 1.0)]
    rewards = {m.metric: m for m in record.metrics}["response/rewards/mean"]
    assert (rewards.num_steps, rewards.final) == (10, pytest.approx(1.0))
    assert rewards.mean == pytest.approx(0.55) and rewards.last_window_mean == pytest.approx((0.9 + 1.0) / 2)
    assert record.warnings == ()


def test_the_identity_survives_a_move_and_differs_between_runs(tmp_path) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.05})
    moved = Path(shutil.copytree(folder, tmp_path / "elsewhere"))
    other = write_results_folder(tmp_path, "c", 2, {REWARDS: 0.05})
    assert read_results_folder(folder).run_key == read_results_folder(moved).run_key
    assert read_results_folder(folder).run_key != read_results_folder(other).run_key


def test_non_finite_statistics_are_kept_as_missing(tmp_path) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.05})
    data = json.loads((folder / "results.json").read_text())
    data["results"][1]["observed"] = "nan"
    (folder / "results.json").write_text(json.dumps(data))
    assert read_results_folder(folder).checks[1].observed is None


def test_a_folder_without_its_tracker_copy_is_recorded_with_a_warning(tmp_path) -> None:
    record = read_results_folder(write_results_folder(tmp_path, "c", 1, {REWARDS: 0.05}, tracker=False))
    assert record.metrics == ()
    assert record.warnings == (f"{tmp_path / 'c' / 'night-01'}: no tracker copy (tracker.jsonl, trainer_state.json, "
                               "tensorboard, mlflow-run, wandb-run.wandb, history.csv, console.log); "
                               "per-metric summaries not recorded",)


def test_the_start_falls_back_to_preflight_time(tmp_path) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {})
    data = json.loads((folder / "results.json").read_text())
    del data["context"]["launch"]
    (folder / "results.json").write_text(json.dumps(data))
    assert read_results_folder(folder).started_at == "2026-01-02T02:00:00+00:00"


def test_summaries_skip_non_finite_values() -> None:
    summary = summarise_series("m", {1: 1.0, 2: float("nan"), 3: 3.0, 4: 5.0})
    assert (summary.num_steps, summary.final, summary.mean, summary.last_window_mean) == (4, 5.0, 3.0, 5.0)


V1 = '"schema_version": 1, '


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, found list"),
    ('{"status": "ok", "case": "c"}', "no key 'schema_version'; is this an rl-autotest results.json?"),
    ('{"schema_version": 99, "case": "c", "status": "PASS"}',
     "key 'schema_version' is 99; this rl-autotest reads results.json version 1"),
    ('{"schema_version": "1", "case": "c", "status": "PASS"}', "key 'schema_version' is '1'"),
    ('{' + V1 + '"status": "PASS"}', "key 'case' is None; expected a case name"),
    ('{' + V1 + '"case": "../x", "status": "PASS"}', "key 'case' is '../x'; expected a case name"),
    ('{' + V1 + '"case": "c", "status": "ok"}', "key 'status' is 'ok'; expected one of PASS, FAIL, ERROR"),
    ('{' + V1 + '"case": "c", "status": "MAYBE"}', "key 'status' is 'MAYBE'; expected one of PASS, FAIL, ERROR"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": {}}', "key 'results' must be a list of checks"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"status": "PASS"}]}', "results[0] has no check_id/status"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "PASS"}, '
     '{"check_id": "a", "status": "FAIL"}]}', "a check_id appears twice"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "ok"}]}',
     "key 'results[0].status' is 'ok'; expected one of PASS, FAIL, ERROR, INFO"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "PASS", "observed": "abc"}]}',
     "key 'results[0].observed' is 'abc'; expected a number (or null)"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "PASS", "threshold": true}]}',
     "key 'results[0].threshold' is True; expected a number"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "PASS", "severity": "x"}]}',
     "key 'results[0].severity' is 'x'; expected one of gate, reference"),
    ('{' + V1 + '"case": "c", "status": "PASS", "results": [{"check_id": "a", "status": "PASS", "metric": 3}]}',
     "key 'results[0].metric' is a number, not text (or null)"),
    ('{' + V1 + '"case": "c", "status": "PASS", "context": {"kind": "nightly"}}',
     "key 'context.kind' is 'nightly'; expected one of gate, calibration, fault, dry-run, bisect, tier, ab"),
    ('{' + V1 + '"case": "c", "status": "PASS", "context": {"commit": {"sha": 5}}}',
     "key 'context.commit.sha' is 5; expected text"),
])
def test_a_corrupt_results_json_is_one_clear_error(tmp_path, text, message) -> None:
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'results.json'}: .*") as caught:
        read_results_folder(tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_folder_without_results_json_is_named(tmp_path) -> None:
    with pytest.raises(UsageError, match=r"no results.json; pass a results folder"):
        read_results_folder(tmp_path)


def test_a_results_root_is_walked_and_a_folder_s_own_subfolders_are_not_runs(tmp_path) -> None:
    a = write_results_folder(tmp_path, "c", 1, {})
    b = write_results_folder(tmp_path, "d", 2, {})
    (a / "consistency").mkdir()
    (a / "consistency" / "results.json").write_text("{}")
    assert find_results_folders(tmp_path) == [a.resolve(), b.resolve()]
    assert find_results_folders(a) == [a.resolve()]


def test_a_run_of_replicates_is_recorded_as_its_single_runs(tmp_path) -> None:
    from autotest.history.store import default_root_of

    run = write_results_folder(tmp_path, "c", 1, {})
    (run / "replicates").mkdir()
    replicas = [write_results_folder(tmp_path / "made", "c", i, {}).rename(run / "replicates" / f"r{i}-seed{i}")
                for i in (1, 2)]
    assert find_results_folders(tmp_path) == [r.resolve() for r in replicas]
    assert find_results_folders(run) == [r.resolve() for r in replicas]
    # a replicate's history lives with its run's results root, not inside the run
    assert default_root_of(replicas[0], "c") == default_root_of(run, "c")


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "no such file or directory"),
    (lambda p: (p / "f.txt", (p / "f.txt").write_text("x"))[0], "is a file"),
    (lambda p: p, "no results.json in it or below"),
])
def test_bad_ingest_paths_are_one_clear_error(tmp_path, make, message) -> None:
    with pytest.raises(UsageError, match=message):
        find_results_folders(make(tmp_path))


def test_non_finite_statistics_as_results_json_writes_them_are_recorded_as_missing(tmp_path) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.1})
    data = json.loads((folder / "results.json").read_text())
    data["results"][1]["observed"] = "nan"
    (folder / "results.json").write_text(json.dumps(data))
    check = next(c for c in read_results_folder(folder).checks if c.check_id == REWARDS)
    assert check.observed is None and check.threshold == 0.19


@pytest.mark.parametrize("context, kind", [
    ({}, "gate"), ({"fault": "lr-scale:0.1"}, "fault"), ({"kind": "calibration"}, "calibration"),
    ({"kind": "bisect"}, "bisect"), ({"kind": "gate", "fault": "x"}, "gate"),
])
def test_a_run_s_kind_comes_from_its_context(tmp_path, context, kind) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {})
    data = json.loads((folder / "results.json").read_text())
    data["context"] = context
    (folder / "results.json").write_text(json.dumps(data))
    assert read_results_folder(folder).kind == kind


def test_a_run_s_cost_is_read_from_its_context(tmp_path) -> None:
    from autotest.history.run_facts import device_seconds_of_folder

    folder = write_results_folder(tmp_path, "c", 1, {})
    assert read_results_folder(folder).device_seconds is None  # written before costs
    data = json.loads((folder / "results.json").read_text())
    data["context"]["cost"] = {"device_seconds": 812.5, "wall_s": 101.6, "devices": 8, "device": "gpu"}
    (folder / "results.json").write_text(json.dumps(data))
    assert read_results_folder(folder).device_seconds == 812.5
    assert device_seconds_of_folder(folder) == 812.5
    data["context"]["cost"] = {"device_seconds": "lots"}
    (folder / "results.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"key 'context.cost.device_seconds' is 'lots', not a number; fix or remove"):
        read_results_folder(folder)
    assert device_seconds_of_folder(folder) is None


def test_a_run_s_cost_basis_and_each_gate_s_mde_are_read(tmp_path) -> None:
    from tests.unit.history.builders import REWARDS

    cost = {"device_seconds": 61.0, "basis": "cpu-seconds", "quantity": "CPU-seconds: ..."}
    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.1}, cost=cost, mde={REWARDS: 0.042})
    record = read_results_folder(folder)
    assert (record.device_seconds, record.cost_basis) == (61.0, "cpu-seconds")
    assert {c.check_id: c.mde for c in record.checks} == {"steps[count]": None, REWARDS: 0.042}
    data = json.loads((folder / "results.json").read_text())
    data["context"]["cost"]["basis"] = 7
    (folder / "results.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"key 'context.cost.basis' is 7, not a short text; fix or remove the key"):
        read_results_folder(folder)
    data["context"]["cost"]["basis"] = "cpu-seconds"
    data["results"][1]["mde"] = "wide"
    (folder / "results.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"key 'results\[1\].mde' is 'wide'; expected a number"):
        read_results_folder(folder)
