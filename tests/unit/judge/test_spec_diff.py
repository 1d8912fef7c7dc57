"""Each difference between a baseline (its checks, its case's launch env and timeout) and the framework's own spec is
named once, in a sentence; a matching baseline has none. The report renders what the verdict recorded."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.inputs.baseline_model import CheckSpec
from autotest.inputs.framework_spec import FrameworkSpec, SpecCheck
from autotest.judge.model import PASS, Verdict
from autotest.judge.spec_diff import ABSENT, COMPARED, SpecComparison, compare_spec, describe_check
from autotest.report.markdown import render_markdown, render_step_summary, write_results_json
from autotest.report.md_safe import md_text

WHERE = "autotest/config.yaml@2ea7e806c1ae"
SPEC = FrameworkSpec(
    where=WHERE, case="qwen3-rl-lmdeploy",
    checks=(SpecCheck("response/rewards/mean", "absolute", "<", 0.1, 80, True),
            SpecCheck("mismatch/mismatch_k3_kl", "value", "<", 0.001),
            SpecCheck("eval/accuracy", "absolute", "<", 0.05)),
    env={"XTUNER_DETERMINISTIC": "true", "MODEL_PATH": "/mnt/model"}, timeout_s=2460.0,
    base_metric="qwen3-rl-lmdeploy/tracker.jsonl")
MATCHING = (CheckSpec("response/rewards/mean", "absolute", "<", 0.1, scope="percentile", percentile=80.0),
            CheckSpec("mismatch/mismatch_k3_kl", "value", "<", 0.001),
            CheckSpec("eval/accuracy", "absolute", "<", 0.05, scope="final"))
GOLDEN = "/share/qwen3-rl-lmdeploy/tracker.jsonl"


def test_a_baseline_that_matches_the_spec_has_no_difference():
    assert compare_spec(SPEC, MATCHING, {"XTUNER_DETERMINISTIC": "true"}, 2460.0, GOLDEN) == ()
    # a reference-only check is no gate: it neither matches a spec check nor counts as the baseline's own
    extra = CheckSpec("entropy", "absolute", "<", 1.0, severity="reference")
    assert compare_spec(SPEC, (*MATCHING, extra), {"XTUNER_DETERMINISTIC": "true"}, 2460.0, GOLDEN) == ()


def test_the_seed_baseline_against_todays_spec_names_each_difference():
    seed = (MATCHING[0], CheckSpec("mismatch/mismatch_k3_kl", "absolute", "<=", 0.0001), MATCHING[2],
            CheckSpec("time/step", "absolute", "<", 10.0))
    found = compare_spec(SPEC, seed, {"XTUNER_DETERMINISTIC": "false"}, 3000.0, "/elsewhere/golden.jsonl")
    assert [(d.topic, d.key) for d in found] == [
        ("check", "mismatch/mismatch_k3_kl"), ("check", "time/step"), ("env", "XTUNER_DETERMINISTIC"),
        ("timeout", "launch.timeout_s"), ("golden", "base_metric")]
    assert [d.line for d in found] == [
        "the framework's spec checks mismatch/mismatch_k3_kl: value < 0.001, stepwise; this baseline checks it: "
        "absolute <= 0.0001, stepwise",
        "this baseline checks time/step: absolute < 10, stepwise; the framework's spec does not check it",
        "the framework's spec runs with XTUNER_DETERMINISTIC=true; this case's launch sets XTUNER_DETERMINISTIC=false",
        "the framework's spec gives the run 2460 s; this case's launch.timeout_s is 3000 s",
        "the framework's spec compares against qwen3-rl-lmdeploy/tracker.jsonl in its baseline store; this "
        "baseline's golden tracker is /elsewhere/golden.jsonl"]


def test_a_spec_check_the_baseline_lacks_a_percentile_and_an_unset_variable():
    found = compare_spec(SPEC, MATCHING[1:], {}, None)
    assert [d.line for d in found] == [
        "the framework's spec checks response/rewards/mean: absolute < 0.1, p80 of per-step errors; this baseline "
        "does not check it",
        "the framework's spec runs with XTUNER_DETERMINISTIC=true; this case's launch does not set it",
        "the framework's spec gives the run 2460 s; this case's launch.timeout_s is none"]
    stepwise = CheckSpec("response/rewards/mean", "absolute", "<", 0.1)  # per step, not the checker's p80
    assert [d.key for d in compare_spec(SPEC, (stepwise, *MATCHING[1:]), {"XTUNER_DETERMINISTIC": "true"},
                                        2460.0)] == ["response/rewards/mean"]


def test_describe_check_names_the_hardware_whose_threshold_applies():
    check = CheckSpec("time/step", "absolute", "<", 15.0, hardware="8x H200")
    assert describe_check(check) == "absolute < 15 (on 8x H200), stepwise"


def _verdict(note: SpecComparison) -> Verdict:
    return Verdict(status=PASS, case="c", results=(), framework_spec=note)


def test_the_verdict_records_and_the_report_renders_the_differences(tmp_path: Path):
    found = compare_spec(SPEC, MATCHING[1:], {}, 2460.0)
    note = SpecComparison("autotest/config.yaml", "qwen3-rl-lmdeploy", "follow", "2ea7e806" + "0" * 32, COMPARED,
                          changed_in="2ea7e806" + "0" * 32, differences=found)
    data = json.loads(write_results_json(_verdict(note), tmp_path).read_text())["framework_spec"]
    assert (data["state"], data["followed"], data["commit"]) == ("compared", True, "2ea7e806" + "0" * 32)
    assert [d["key"] for d in data["differences"]] == ["response/rewards/mean", "XTUNER_DETERMINISTIC"]
    report = render_markdown(_verdict(note))
    assert "## The framework's own spec" in report
    assert "this case follows it: its environment was set for the run and its checks were the gate" in report
    for d in found:
        assert f"- {md_text(d.line)}" in report
    assert note.headline() == ("framework spec autotest/config.yaml@2ea7e8060000 (case qwen3-rl-lmdeploy, follow): "
                               "2 differences from the baseline (check response/rewards/mean, env "
                               "XTUNER_DETERMINISTIC; the gate held the spec's; see the report)")
    assert note.headline() in render_step_summary(_verdict(note))


def test_an_absent_spec_is_stated_not_an_error():
    note = SpecComparison("autotest/config.yaml", "qwen3-rl-lmdeploy", "follow", "a" * 40, ABSENT,
                          note="absent at aaaaaaaaaaaa: autotest/config.yaml is not in that commit; the baseline's "
                               "checks gate this run")
    assert not note.followed
    report = render_markdown(_verdict(note))
    assert "- absent at aaaaaaaaaaaa: autotest/config.yaml is not in that commit; the baseline's checks gate this run" \
        in report
    assert note.headline().endswith("is not in that commit; the baseline's checks gate this run")
    assert "framework_spec" not in render_markdown(Verdict(status=PASS, case="c", results=()))
