"""Following a framework spec, without git: the spec's settings and timeout go into the launch, its checks replace the
baseline's on the metrics it checks, and nothing changes for a case that holds its own or a spec that was not read."""

from __future__ import annotations

from dataclasses import replace

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.inputs.case_framework_spec import FrameworkSpecRef
from autotest.inputs.framework_spec import FrameworkSpec, SpecCheck
from autotest.judge.spec_diff import spec_comparison
from autotest.run.framework_spec_read import SpecReading, follow_baseline, follow_case, follow_problem
from tests.helpers import ROOT

SPEC = FrameworkSpec(where="autotest/config.yaml@abc", case="qwen3-rl-lmdeploy",
                     checks=(SpecCheck("mismatch/mismatch_k3_kl", "absolute", "<=", 1e-4),),
                     env={"XTUNER_DETERMINISTIC": "true", "MODEL_PATH": "/mnt/m", "EXTRA": "1"}, timeout_s=999.0)
FOLLOW = FrameworkSpecRef("autotest/config.yaml", "qwen3-rl-lmdeploy", "follow")


def _grpo(monkeypatch):
    monkeypatch.setenv("CI_SHARE_BASELINE", "/share")
    return load_case("grpo-gsm8k-qwen3-8b-lmdeploy"), load_baseline(ROOT / "baselines" /
                                                                     "grpo-gsm8k-qwen3-8b-lmdeploy.yaml")


def test_following_sets_the_spec_settings_and_timeout_and_holds_its_checks(monkeypatch):
    case, baseline = _grpo(monkeypatch)
    reading = SpecReading(FOLLOW, "a" * 40, spec=SPEC)
    followed = follow_case(case, reading)
    assert followed.launch.env == {"XTUNER_DETERMINISTIC": "true", "EXTRA": "1"}  # no path of the spec's cluster
    assert followed.launch.timeout_s == 999.0
    held = follow_baseline(baseline, reading)
    k3 = [c for c in held.checks if c.metric == "mismatch/mismatch_k3_kl"]
    assert [(c.method, c.operator, c.threshold) for c in k3] == [("absolute", "<=", 1e-4)]
    assert [c.metric for c in held.checks if c.metric != "mismatch/mismatch_k3_kl"] == \
        [c.metric for c in baseline.checks if c.metric != "mismatch/mismatch_k3_kl"]  # the others stay
    assert held.golden_tracker == baseline.golden_tracker
    # the verdict compares the spec with the baseline and the case as written, not as followed
    note = spec_comparison(reading, baseline, case)
    assert [d.key for d in note.differences] == [
        "mismatch/mismatch_k3_kl", "response/rewards/mean", "response/response_len/mean", "time/step", "eval/accuracy",
        "EXTRA", "launch.timeout_s"]  # the baseline's gates on metrics this spec does not check are named too
    assert note.followed


def test_holding_its_own_or_an_unread_spec_changes_nothing(monkeypatch):
    case, baseline = _grpo(monkeypatch)
    own = SpecReading(replace(FOLLOW, mode="own"), "a" * 40, spec=SPEC)
    absent = SpecReading(FOLLOW, "a" * 40, absent="absent at aaaaaaaaaaaa: autotest/config.yaml is not in that commit")
    for reading in (own, absent, None):
        assert follow_case(case, reading) is case and follow_baseline(baseline, reading) is baseline
    assert spec_comparison(absent, baseline, case).note.endswith("; the baseline's checks gate this run")
    assert spec_comparison(replace(absent, ref=own.ref), baseline, case).note.endswith("; nothing to compare")


def test_a_spec_that_cannot_be_read_stops_a_following_case_only():
    error = "autotest/config.yaml@abc: case.x[0].timeout: -1 is not a positive number of seconds; fix it"
    assert follow_problem(SpecReading(FOLLOW, "a" * 40, error=error)) == \
        f"{error} (the case follows this spec: framework_spec.mode: follow)"
    assert follow_problem(SpecReading(replace(FOLLOW, mode="own"), "a" * 40, error=error)) is None
    unread = SpecReading(FOLLOW, "a" * 40, error=error).provenance()
    assert (unread["state"], unread["note"]) == ("unread", error)
