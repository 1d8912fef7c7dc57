"""The framework's own spec, read at the commit under test: a verdict at a commit whose spec differs from the baseline
names each difference; a case that follows the spec runs with its settings and is gated by its checks; an absent spec
is stated; a malformed one is one line; the calibration provenance records the spec's commit.

A real git repository made by the test stands in for the framework (framework_spec_repo.py); each run is a real
(three-step shell script) run through the pipeline, its ref fetched into a checkout as CI would.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from autotest.errors import UsageError
from autotest.inputs.case_framework_spec import FrameworkSpecRef
from autotest.run.framework_spec_read import import_spec, read_spec
from tests.integration.run.framework_spec_repo import MOVED, build_repo, run, write_case


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, str]:
    return build_repo(tmp_path)


def _results(outcome) -> dict:
    return json.loads((outcome.results_dir / "results.json").read_text())


def test_a_verdict_at_a_commit_whose_spec_differs_names_each_difference(repo, tmp_path):
    case = write_case(tmp_path, repo["repo"], "own", env="  env: {XTUNER_DETERMINISTIC: \"true\"}\n")
    same = run(case, tmp_path)  # main: the spec matches the baseline
    moved = run(case, tmp_path, framework_ref="refs/pull/9/head")
    assert (same.status, moved.status) == ("PASS", "PASS"), (same.reason, moved.reason)  # the case holds its own
    spec = _results(same)["framework_spec"]
    assert (spec["state"], spec["commit"], spec["differences"], spec["followed"]) == \
        ("compared", repo["good"], [], False)
    assert "the baseline matches it" in same.summary_line()

    spec = _results(moved)["framework_spec"]
    assert (spec["commit"], spec["changed_in"]) == (repo["moved"], repo["moved"])
    assert [d["line"] for d in spec["differences"]] == [
        "the framework's spec checks mismatch/mismatch_k3_kl: absolute <= 1e-05, stepwise; this baseline checks it: "
        "value < 0.001, stepwise",
        "the framework's spec gives the run 120 s; this case's launch.timeout_s is 60 s"]
    report = (moved.results_dir / "report.md").read_text()
    assert "## The framework's own spec" in report and f"at commit `{repo['moved']}`" in report
    assert "this case holds its own: the baseline's checks were the gate" in report
    assert "absolute &lt;= 1e-05, stepwise; this baseline checks it: value &lt; 0.001, stepwise" in report
    line = moved.summary_line()
    assert f"framework spec autotest/config.yaml@{repo['moved'][:12]} (case fw-rl, own): 2 differences from the " \
           "baseline (check mismatch/mismatch_k3_kl, timeout launch.timeout_s; the gate held the baseline's" in line
    # the run itself is untouched by a spec it does not follow
    assert "XTUNER_DETERMINISTIC=true" in (moved.results_dir / "logs" / "stdout.log").read_text()


def test_a_case_that_follows_runs_with_the_spec_settings_and_is_gated_by_its_checks(repo, tmp_path):
    case = write_case(tmp_path, repo["repo"], "follow")
    good = run(case, tmp_path)
    assert good.status == "PASS", good.reason
    assert "XTUNER_DETERMINISTIC=true" in (good.results_dir / "logs" / "stdout.log").read_text()
    spec = _results(good)["framework_spec"]
    assert spec["followed"] and [d["line"] for d in spec["differences"]] == [
        "the framework's spec runs with XTUNER_DETERMINISTIC=true; this case's launch does not set it"]
    # the spec's cluster paths are not settings: the case's inputs stand for them
    assert "MODEL_PATH" not in json.dumps(_results(good)["context"]["launch"])

    moved = run(case, tmp_path, framework_ref="spec-moved")  # same code; the spec now bounds k3's drift at 1e-5
    assert moved.status == "FAIL"
    results = _results(moved)
    k3 = next(r for r in results["results"] if r["metric"] == "mismatch/mismatch_k3_kl")
    assert (k3["method"], k3["operator"], k3["threshold"], k3["status"]) == ("absolute", "<=", 1e-05, "FAIL")
    assert "autotest/config.yaml@" + repo["moved"][:12] in k3["derivation"]
    assert results["context"]["launch"]["timeout_s"] == 120  # the spec's timeout
    assert [d["key"] for d in results["framework_spec"]["differences"]] == [
        "mismatch/mismatch_k3_kl", "XTUNER_DETERMINISTIC", "launch.timeout_s"]
    assert "the gate held the spec's" in moved.summary_line()
    card = (moved.results_dir / "card.md").read_text()  # the card says, before launch, which checks gate and why
    assert "- mismatch/mismatch_k3_kl: absolute <= 1e-05, stepwise" in card
    assert f"- framework spec autotest/config.yaml@{repo['moved'][:12]} (case fw-rl, follow): 3 differences" in card


def test_an_absent_spec_is_stated_and_a_malformed_one_is_one_line(repo, tmp_path):
    follow = write_case(tmp_path, repo["repo"], "follow")
    gone = run(follow, tmp_path, framework_ref="no-spec")
    assert gone.status == "PASS", gone.reason
    spec = _results(gone)["framework_spec"]
    assert (spec["state"], spec["note"]) == ("absent", f"absent at {repo['gone'][:12]}: autotest/config.yaml is not "
                                                       "in that commit; the baseline's checks gate this run")
    # following a spec that cannot be read stops before launch, in one line naming file@commit and key
    broken = run(follow, tmp_path, framework_ref="bad-spec")
    assert broken.status == "ERROR" and not (broken.results_dir / "logs" / "stdout.log").exists()
    assert f"autotest/config.yaml@{repo['broken'][:12]}: case.fw-rl[0].assert_info.check_metrics[1].method: " \
           "'ratio' is not one of absolute, relative, slowdown, value" in broken.reason
    own = write_case(tmp_path, repo["repo"], "own")
    noted = run(own, tmp_path, framework_ref="bad-spec")  # holding its own, the run goes on and the verdict says why
    assert noted.status == "PASS" and _results(noted)["framework_spec"]["state"] == "unread"


def test_the_spec_is_read_at_the_commit_never_from_the_tree(repo):
    checkout = Path(repo["repo"])
    (checkout / "autotest" / "config.yaml").write_text(MOVED)  # an edit not committed
    reading = read_spec(FrameworkSpecRef("autotest/config.yaml", "fw-rl", "own"), checkout)
    assert reading.commit == repo["good"] and reading.spec.checks[1].method == "value"
    absent = read_spec(FrameworkSpecRef("autotest/config.yaml", "other", "own"), checkout)
    assert absent.spec is None and absent.absent.endswith("autotest/config.yaml has no case 'other'")
    assert read_spec(FrameworkSpecRef("a.yaml", "x", "own"), checkout.parent).absent.startswith(
        "not read: the commit under test in ")
    with pytest.raises(UsageError, match="^--framework-spec: absent at .*: nope.yaml is not in that commit"):
        import_spec("nope.yaml:fw-rl", checkout)
    # bytes that are neither UTF-8 nor YAML, committed: one line naming file@commit and the line, no traceback
    (checkout / "autotest" / "bin.yaml").write_bytes(b"case:\n  fw-rl: \xff\x00\n")
    subprocess.run(["git", "-C", str(checkout), "checkout", "-q", "-b", "binary"], check=True)
    subprocess.run(["git", "-C", str(checkout), "add", "autotest/bin.yaml"], check=True)
    subprocess.run(["git", "-C", str(checkout), "commit", "-q", "-m", "binary"], check=True)
    binary = read_spec(FrameworkSpecRef("autotest/bin.yaml", "fw-rl", "own"), checkout)
    assert binary.spec is None and binary.error.startswith("autotest/bin.yaml@") and ":2: " in binary.error
    assert "\n" not in binary.error


def test_the_calibration_provenance_records_the_spec_commit(repo, tmp_path):
    from autotest.calibration.runs import CalibrationOptions, calibrate_case
    from autotest.inputs.case import load_case

    case = write_case(tmp_path, repo["repo"], "own", env="  env: {XTUNER_DETERMINISTIC: \"true\"}\n")
    outcome = calibrate_case(load_case(case), CalibrationOptions(
        results_root=tmp_path / "results", runs=2, framework_ref="spec-moved"))
    provenance = yaml.safe_load(outcome.candidate.read_text())["provenance"]
    assert provenance["commit"]["sha"] == repo["moved"]
    assert provenance["framework_spec"] == {"path": "autotest/config.yaml", "case": "fw-rl", "mode": "own",
                                            "commit": repo["moved"], "changed_in": repo["moved"], "state": "compared"}


def test_init_imports_the_spec_checks(repo, tmp_path, monkeypatch):
    from autotest.calibration.init import InitOptions, init_case

    log = tmp_path / "tracker.jsonl"
    subprocess.run(["bash", str(Path(repo["repo"]) / "run.sh")], check=True, capture_output=True,
                   env={"WORK_DIR": str(tmp_path / "w"), "PATH": "/usr/bin:/bin"})
    log.write_bytes(next((tmp_path / "w").rglob("tracker.jsonl")).read_bytes())
    monkeypatch.chdir(repo["repo"])
    outcome = init_case(InitOptions(name="fw-init", command=("bash", "run.sh"), cases_dir=tmp_path / "c",
                                    baselines_dir=tmp_path / "b", results_root=tmp_path / "r", log=log,
                                    framework_spec="autotest/config.yaml:fw-rl"))
    written = yaml.safe_load(outcome.baseline_path.read_text())
    k3 = [c for c in written["checks"] if c["metric"] == "mismatch/mismatch_k3_kl"]
    assert [(c["method"], c["operator"], c["threshold"]) for c in k3] == [("value", "<", 0.001)]
    assert written["provenance"]["framework_spec"]["commit"] == repo["good"]
    assert "# framework_spec: {path: autotest/config.yaml, case: fw-rl, mode: follow}" in \
        outcome.case_path.read_text()


def test_init_refuses_a_spec_it_cannot_read_in_one_line_before_running(repo, tmp_path, monkeypatch, capsys):
    from autotest.cli import main

    monkeypatch.chdir(repo["repo"])
    marker = tmp_path / "ran"
    argv = ["init", "fw-init", "--cases-dir", str(tmp_path / "c"), "--baselines-dir", str(tmp_path / "b"),
            "--results-dir", str(tmp_path / "r"), "--framework-spec", "SPEC", "--", "touch", str(marker)]
    for value, line in (("autotest/config.yaml", "--framework-spec: 'autotest/config.yaml' is not PATH:CASE"),
                        ("autotest/config.yaml:other", "--framework-spec: absent at ")):
        code = main([value if word == "SPEC" else word for word in argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(f"rl-autotest: error: {line}"), err
    assert not marker.exists()


def test_the_mean_of_replicates_is_held_to_the_followed_spec(repo, tmp_path):
    case = write_case(tmp_path, repo["repo"], "follow", env="  env: {}\nseed: {env: SEED}\nreplicates: 2\n")
    mean = run(case, tmp_path, framework_ref="spec-moved")
    assert mean.status == "FAIL" and mean.replicates == 2
    results = _results(mean)
    k3 = next(r for r in results["results"] if r["metric"] == "mismatch/mismatch_k3_kl")
    assert (k3["method"], k3["operator"], k3["status"]) == ("absolute", "<=", "FAIL")
    assert results["framework_spec"]["followed"] and results["framework_spec"]["commit"] == repo["moved"]
