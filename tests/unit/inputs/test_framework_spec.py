"""The framework's own spec (xtuner's autotest/config.yaml) read into checks, environment and timeout; each malformed
spec is one line naming file@commit, the dotted key and what to do."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.framework_spec import parse_spec
from autotest.inputs.framework_spec_checks import spec_checks
from autotest.inputs.yaml_load import load_yaml_text

WHERE = "autotest/config.yaml@0123456789ab"

# the shape of xtuner main b934f462's qwen3-rl-lmdeploy entry (values as published), beside a two-phase case
SPEC = """
default_config:
    train:
        resource:
            envs:
                - HF_HUB_CACHE=/mnt/cache
                - SOME_FLAG=1
case:
    qwen3-rl-lmdeploy:
        -
            type: rl
            resource:
                envs:
                    - MODEL_PATH=/mnt/model/Qwen3-8B
                    - XTUNER_DETERMINISTIC=true
            assert_info:
                base_metric: qwen3-rl-lmdeploy/tracker.jsonl
                check_metrics:
                    - {metric: eval/accuracy, threshold: 0.05, method: absolute, operator: "<"}
                    - {metric: response/rewards/mean, threshold: 0.1, method: absolute, operator: "<"}
                    - {metric:  mismatch/mismatch_k3_kl, threshold: 0.001, method: value, operator: "<"}
                    - {metric: response/response_len/mean, threshold: 0.15, method: relative, operator: "<"}
                    - {metric: time/step, threshold: 15, method: absolute, operator: "<"}
            timeout: 2460
    two-phase:
        - {type: rl, phase: first, assert_info: {check_metrics: [{metric: m, threshold: 1, method: slowdown,
           operator: "<=", aggregate: 50}]}}
        - {type: rl, phase: resume, assert_info: {check_metrics: [{metric: m, threshold: 2, method: absolute,
           operator: "<"}]}}
    sft-case:
        - {type: sft, assert_info: {check_metrics: {loss: 0.1}}}
"""


def _parse(text: str = SPEC, case: str = "qwen3-rl-lmdeploy", phase: str | None = None):
    return parse_spec(load_yaml_text(text, WHERE), WHERE, case, phase)


def test_the_published_grpo_entry_reads_as_its_checker_reads_it():
    spec = _parse()
    assert [(c.metric, c.method, c.operator, c.threshold, c.percentile) for c in spec.checks] == [
        ("eval/accuracy", "absolute", "<", 0.05, None),
        ("response/rewards/mean", "absolute", "<", 0.1, 80),  # check_rl_result's default p80
        ("mismatch/mismatch_k3_kl", "value", "<", 0.001, None),
        ("response/response_len/mean", "relative", "<", 0.15, 80),
        ("time/step", "absolute", "<", 15.0, None)]
    assert spec.checks[1].percentile_by_default and not spec.checks[0].percentile_by_default
    # the step's own list replaces default_config's (xtuner merges dicts; a list is replaced)
    assert dict(spec.env) == {"MODEL_PATH": "/mnt/model/Qwen3-8B", "XTUNER_DETERMINISTIC": "true"}
    assert spec.settings == {"XTUNER_DETERMINISTIC": "true"}  # a path on the spec's cluster is not a setting
    assert (spec.timeout_s, spec.base_metric, spec.where) == (2460.0, "qwen3-rl-lmdeploy/tracker.jsonl", WHERE)


def test_the_harness_checks_of_a_followed_spec():
    described = [c.describe() for c in spec_checks(_parse())]
    assert described == ["eval/accuracy: absolute < 0.05, final point only",
                         "response/rewards/mean: absolute < 0.1, p80 of per-step errors",
                         "mismatch/mismatch_k3_kl: value < 0.001, stepwise",
                         "response/response_len/mean: relative < 0.15, p80 of per-step errors",
                         "time/step: absolute < 15, stepwise"]
    assert all(WHERE in c.derivation for c in spec_checks(_parse()))


def test_default_envs_apply_to_a_step_without_its_own_and_a_phase_picks_the_step():
    spec = _parse(case="two-phase", phase="first")
    assert dict(spec.env) == {"HF_HUB_CACHE": "/mnt/cache", "SOME_FLAG": "1"}
    assert (spec.checks[0].method, spec.checks[0].percentile, spec.checks[0].percentile_by_default) == \
        ("slowdown", 50, False)
    assert _parse(case="two-phase", phase="resume").checks[0].threshold == 2.0


def test_a_case_the_file_does_not_have_is_none_not_an_error():
    assert _parse(case="not-there") is None


@pytest.mark.parametrize("edit, line", [
    (("method: value", "method: ratio"), "case.qwen3-rl-lmdeploy[0].assert_info.check_metrics[2].method: 'ratio' "
                                         "is not one of absolute, relative, slowdown, value; fix it in the "
                                         "framework's spec, or set framework_spec.mode: own in the case"),
    (('operator: "<"}\n                    - {metric: response/response_len', 'operator: ">"}\n'
      '                    - {metric: response/response_len'),
     "case.qwen3-rl-lmdeploy[0].assert_info.check_metrics[2].operator: '>' is not one of <, <="),
    (("threshold: 15,", "threshold: fast,"), "check_metrics[4].threshold: 'fast' is not a finite number"),
    (("threshold: 15,", ""), "check_metrics[4].threshold: required key is missing"),
    (("timeout: 2460", "timeout: -1"), "case.qwen3-rl-lmdeploy[0].timeout: -1 is not a positive number of seconds"),
    (("- XTUNER_DETERMINISTIC=true", "- XTUNER_DETERMINISTIC"),
     "case.qwen3-rl-lmdeploy[0].resource.envs[1]: 'XTUNER_DETERMINISTIC' is not NAME=value"),
    (("base_metric: qwen3-rl-lmdeploy/tracker.jsonl", "base_metric: [1]"),
     "assert_info.base_metric: [1] is not a path"),
    (("case:\n", "cases:\n"), "case: missing or not a mapping of case names"),
])
def test_a_malformed_spec_is_one_line_naming_file_commit_and_key(edit, line):
    old, new = edit
    assert old in SPEC
    with pytest.raises(UsageError) as info:
        _parse(SPEC.replace(old, new, 1))
    message = str(info.value)
    assert message.startswith(f"{WHERE}: ") and line in message and "\n" not in message, message


def test_a_case_of_several_steps_needs_its_phase_and_an_sft_case_is_refused():
    with pytest.raises(UsageError, match=r"case\.two-phase: 2 steps \(phases: first, resume\); set "
                                         r"framework_spec\.phase in the case"):
        _parse(case="two-phase")
    with pytest.raises(UsageError, match=r"no step with phase 'middle' \(phases: first, resume\)"):
        _parse(case="two-phase", phase="middle")
    with pytest.raises(UsageError, match=r"case\.sft-case\[0\]\.type: 'sft' is not rl"):
        _parse(case="sft-case")


def test_broken_yaml_at_a_commit_names_the_line():
    with pytest.raises(UsageError) as info:
        _parse("case:\n  a: [1,\n")
    assert str(info.value).startswith(f"{WHERE}:3: ")
