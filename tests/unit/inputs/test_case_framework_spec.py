"""A case's ``framework_spec:`` key: declared once, validated on load, each mistake one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.case_framework_spec import FrameworkSpecRef

CASE = """name: c
description: d
markers: [grpo]
goal: g
minimal_scale: m
platform: {{gpus: 0, framework: {framework}}}
launch: {{command: [bash, run.sh], timeout_s: 10}}
tracker: {{format: xtuner}}
expected: {{steps: 3}}
baseline: baselines/x.yaml
framework_spec: {spec}
"""
FRAMEWORK = "{name: fakefw, env: FAKEFW_ROOT}"


def _load(tmp_path: Path, spec: str, framework: str = FRAMEWORK):
    path = tmp_path / "c.yaml"
    path.write_text(CASE.format(spec=spec, framework=framework))
    return load_case(path)


def test_the_key_loads_into_the_case(tmp_path):
    case = _load(tmp_path, "{path: autotest/config.yaml, case: qwen3-rl-lmdeploy, mode: follow}")
    assert case.framework_spec == FrameworkSpecRef("autotest/config.yaml", "qwen3-rl-lmdeploy", "follow")
    assert case.framework_spec.follows
    own = _load(tmp_path, "{path: a.yaml, case: x, mode: own, phase: resume}").framework_spec
    assert (own.mode, own.phase, own.follows) == ("own", "resume", False)


def test_the_packaged_grpo_case_follows_xtuners_own_spec():
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    assert case.framework_spec == FrameworkSpecRef("autotest/config.yaml", "qwen3-rl-lmdeploy", "follow")
    assert (case.launch.env["XTUNER_DETERMINISTIC"], case.launch.timeout_s) == ("true", 2460.0)


@pytest.mark.parametrize("spec, framework, line", [
    ("{path: a.yaml, case: x, mode: copy}", FRAMEWORK, "framework_spec.mode: 'copy' is not one of follow, own"),
    ("{path: a.yaml, case: x}", FRAMEWORK, "framework_spec.mode: required key is missing"),
    ("{path: /etc/a.yaml, case: x, mode: own}", FRAMEWORK,
     "framework_spec.path: '/etc/a.yaml' is not a path inside the framework's repository; write it relative to "
     "the repository root, e.g. autotest/config.yaml"),
    ("{path: ../a.yaml, case: x, mode: own}", FRAMEWORK, "is not a path inside the framework's repository"),
    ("{path: a.yaml, case: x, mode: own, stage: 1}", FRAMEWORK, "framework_spec.stage: unknown key"),
    ("{path: a.yaml, case: x, mode: own}", "null",
     "framework_spec: the case runs no framework checkout to read the spec in; set platform.framework (or the "
     "project's framework checkout), or remove framework_spec"),
])
def test_a_bad_key_is_one_line(tmp_path, spec, framework, line):
    with pytest.raises(UsageError) as info:
        _load(tmp_path, spec, framework)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c.yaml'}: ") and line in message and "\n" not in message, message
