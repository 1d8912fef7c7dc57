"""Case files: the packaged cases load, every bad file gives its one pinned line, ${ENV} expands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import CASES_DIR, REPO_ROOT, list_cases, load_case
from autotest.inputs.placeholders import expand, placeholder_values, unset_variables
from autotest.inputs.tracker_layout import tracker_location
from tests.helpers import DATA

BAD = DATA / "bad_cases"
EXPECTED = dict(line.split("\t", 1) for line in (BAD / "EXPECTED.txt").read_text().splitlines())

MINIMAL = """name: {name}
description: d
markers: [grpo]
goal: g
minimal_scale: m
platform: {{gpus: 0, framework: null}}
launch:
  command: {command}
  timeout_s: 10
{extra}tracker: {{format: xtuner}}
expected: {{steps: 3}}
baseline: baselines/x.yaml
"""


def write_case(tmp_path: Path, name: str = "c", command: str = '["{python}", -c, "print(1)"]',
               extra: str = "", tail: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(MINIMAL.format(name=name, command=command, extra=extra) + tail)
    return path


def test_every_bad_file_is_pinned() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in BAD.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_case_gives_its_one_line(name: str) -> None:
    path = BAD / name
    with pytest.raises(UsageError) as info:
        load_case(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.replace(str(path), name) == EXPECTED[name]


def test_packaged_cases_load_and_match_seed_003() -> None:
    cases = {c.name: c for c in list_cases()}
    assert {"tiny-grpo", "grpo-gsm8k-qwen3-8b-lmdeploy"} <= set(cases)
    tiny = cases["tiny-grpo"]
    assert tiny.markers == ("grpo",) and tiny.platform.gpus == 0 and tiny.platform.framework is None
    assert tiny.expected.steps == 45 and tiny.expected.exact_steps
    assert tiny.takes_seed and tiny.takes_fault and not tiny.launch.uses_ray
    assert tiny.baseline == "baselines/tiny-grpo.yaml"
    gpu = cases["grpo-gsm8k-qwen3-8b-lmdeploy"]
    assert gpu.launch.command == (
        "bash", "-x", "examples/v1/scripts/run_rl.sh", "autotest/config/rl_qwen3_gsm8k_grpo.py",
        "lmdeploy", "${CI_SHARE_MODEL}/Qwen3-8B", "${CI_SHARE_DATA}/gsm8k/train-mini.jsonl",
        "${CI_SHARE_DATA}/gsm8k/test.jsonl")
    assert gpu.launch.cwd == "${XTUNER_ROOT}" and gpu.launch.uses_ray
    assert gpu.platform.gpus == 8 and set(gpu.markers) == {"grpo", "gpu"}
    assert gpu.platform.framework is not None and gpu.platform.framework.env == "XTUNER_ROOT"
    assert gpu.expected.steps == 45 and gpu.expected.exact_steps
    assert gpu.expected.wall_time_s == 2400 and 2400 < gpu.launch.timeout_s <= 3600
    assert gpu.baseline_path == REPO_ROOT / "baselines" / "grpo-gsm8k-qwen3-8b-lmdeploy.yaml"
    assert not gpu.takes_fault and not gpu.takes_seed


def test_mopd_case_matches_seed_003() -> None:
    case = load_case("mopd-qwen3-vl-2b")
    assert set(case.markers) == {"mopd", "gpu"} and case.platform.gpus == 8
    # a bash string: the seed's launch script; its default TensorBoard log is read as such (no text guard)
    assert isinstance(case.launch.command, str) and 'exp_tracker' not in case.launch.command
    assert case.tracker.format == "tensorboard"
    assert "bash recipe/on_policy_distillation/scripts/run_sampled_token_mopd.sh" in case.launch.command
    assert case.launch.env["TOTAL_TRAIN_STEPS"] == "25" and case.launch.env["EVALUATE_STEP"] == "5"
    assert case.launch.env["XTUNER_RL_NUM_WORKERS"] == "6" and "CUDA_VISIBLE_DEVICES" not in case.launch.env
    assert case.launch.uses_ray and case.launch.term_grace_s > 30  # the script's trap waits 30 s
    assert case.tracker.work_dir_env == "WORK_DIR" and case.expected.steps == 25
    assert case.baseline == "baselines/mopd-qwen3-vl-2b.yaml" and case.baseline_path.is_file()


def test_load_by_name_and_unknown_name() -> None:
    assert load_case("tiny-grpo").source == CASES_DIR / "tiny-grpo.yaml"
    with pytest.raises(UsageError, match=r"^tiny-grp: no such case; known cases: .*tiny-grpo"):
        load_case("tiny-grp")
    with pytest.raises(UsageError, match=r"missing\.yaml: no such case file; check the path$"):
        load_case("/nonexistent/missing.yaml")


def test_unreadable_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(UsageError, match=r"latin\.yaml: cannot read \(.*\); check the file$"):
        load_case(path)


def test_a_consistency_layout_is_kept_per_side(tmp_path: Path) -> None:
    tail = "consistency: {policy: on-breach, layout: {rollout: 'tp=4,kv_heads=2', train: 'pp=2'}}\n"
    case = load_case(write_case(tmp_path, tail=tail))
    assert case.consistency.layout == (("rollout", "tp=4,kv_heads=2"), ("train", "pp=2"))
    with pytest.raises(UsageError, match=r"consistency\.layout\.actor: unknown key; allowed: rollout, train"):
        load_case(write_case(tmp_path, tail="consistency: {policy: on-breach, layout: {actor: 'tp=2'}}\n"))


def test_defaults_and_yaml_off(tmp_path: Path) -> None:
    case = load_case(write_case(tmp_path, tail="consistency: {policy: off}\n"))
    assert case.consistency.policy == "off"  # YAML's bare off is false: read as "off"
    assert case.launch.cwd == "{repo}" and case.launch.env == {} and not case.launch.uses_ray
    assert case.launch.term_grace_s == 10.0
    assert case.tracker.work_dir_env == "WORK_DIR" and case.expected.exact_steps
    assert case.seed.default == 0 and case.seed.calibration == () and case.inputs == {}
    assert case.to_dict()["source"] == str(tmp_path / "c.yaml")


def test_env_numbers_become_text(tmp_path: Path) -> None:
    case = load_case(write_case(tmp_path, extra="", command='["true"]\n  env: {STEPS: 25, LR: 0.5}'))
    assert case.launch.env == {"STEPS": "25", "LR": "0.5"}


def test_string_command_keeps_shell_syntax(tmp_path: Path) -> None:
    # $HOME, ${X:-d} and JSON braces belong to bash; only ${NAME} and {placeholders} are ours
    command = "'echo $HOME ${X:-d} {\"a\": 1} {work_dir} ${RL_T_ROOT}'"
    case = load_case(write_case(tmp_path, command=command))
    env = {"RL_T_ROOT": "/share/with space"}
    out = expand(case, "launch.command", case.launch.command, placeholder_values(work_dir=tmp_path),
                 env, shell=True)
    assert out == f"echo $HOME ${{X:-d}} {{\"a\": 1}} {tmp_path} '/share/with space'"


def test_expand_names_file_key_and_variable(tmp_path: Path) -> None:
    path = write_case(tmp_path, command='["{python}", "${RL_T_MODEL}/Qwen3-8B", "{seed}"]')
    case = load_case(path)
    values = placeholder_values(work_dir=tmp_path, seed=7)
    arg = case.launch.command[1]
    assert expand(case, "launch.command[1]", arg, values, {"RL_T_MODEL": "/m"}) == "/m/Qwen3-8B"
    assert expand(case, "x", case.launch.command[0], values, {}) == sys.executable
    assert expand(case, "x", "{seed}", values, {}) == "7"
    with pytest.raises(UsageError) as info:
        expand(case, "launch.command[1]", arg, values, {})
    assert str(info.value) == (f"{path}: launch.command[1]: ${{RL_T_MODEL}} is not set; "
                               "export RL_T_MODEL before running the case")
    # an empty value would silently turn the path into /Qwen3-8B
    with pytest.raises(UsageError, match="RL_T_MODEL} is not set"):
        expand(case, "launch.command[1]", arg, values, {"RL_T_MODEL": ""})
    assert unset_variables("${A}/${B}/${C}", {"B": "x", "C": ""}) == ["A", "C"]


def test_calibration_seeds_with_seed_env(tmp_path: Path) -> None:
    case = load_case(write_case(tmp_path, command='["true"]',
                                tail="seed: {default: 3, calibration: [1, 2], env: SEED}\n"))
    assert case.takes_seed and case.seed.env == "SEED" and case.seed.calibration == (1, 2)


def test_tracker_location(tmp_path: Path) -> None:
    work = tmp_path / "work"
    case = load_case(write_case(tmp_path, name="a"))
    assert tracker_location(case, work, {}) == (work.resolve(), None)
    path = write_case(tmp_path, name="b", extra="", command='["true"]').read_text()
    (tmp_path / "b.yaml").write_text(path.replace(
        "tracker: {format: xtuner}", "tracker: {format: verl, path: '{work_dir}/m.jsonl'}"))
    case = load_case(tmp_path / "b.yaml")
    assert tracker_location(case, work, {}) == (work.resolve(), work.resolve() / "m.jsonl")
    (tmp_path / "c.yaml").write_text(path.replace("name: b", "name: c").replace(
        "tracker: {format: xtuner}",
        "tracker: {format: xtuner, work_dir_env: null, work_dir: '${RL_T_ROOT}/work_dirs/x'}"))
    case = load_case(tmp_path / "c.yaml")
    assert case.tracker.work_dir_env is None
    assert tracker_location(case, work, {"RL_T_ROOT": "/r"}) == (Path("/r/work_dirs/x"), None)
