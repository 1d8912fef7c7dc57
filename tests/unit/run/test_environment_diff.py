"""What changed between a golden's recorded environment and today's: packages, GPU, Python; never the host name,
the interpreter path, the kernel build, the CPU count or the framework's own package."""

from __future__ import annotations

import copy

from autotest.run.environment_diff import environment_changes

RECORDED = {
    "python": "3.11.7", "python_executable": "/a/venv/bin/python", "platform": "Linux-6.1-x86_64", "machine": "x86_64",
    "hostname": "node-1", "cpu_count": 64,
    "packages": {"torch": "2.5.1", "vllm": "0.8.0", "xtuner": "1.0.0", "numpy": "2.1.0"},
    "gpu": {"count": 8, "source": "nvidia-smi", "models": ["NVIDIA H100"], "driver": "550.54", "cuda": "12.4"},
    "framework": {"python": "/fw/bin/python", "packages": {"torch": "2.5.1", "lmdeploy": "0.9.0"}},
}


def test_the_same_environment_on_another_node_has_no_change():
    today = copy.deepcopy(RECORDED)
    today.update(hostname="node-7", python_executable="/b/venv/bin/python", platform="Linux-6.2-x86_64", cpu_count=96)
    today["gpu"]["source"] = "nvidia-smi (cached)"
    today["framework"]["python"] = "/other/bin/python"
    assert environment_changes(RECORDED, today) == []


def test_each_change_is_one_line_old_to_new():
    today = copy.deepcopy(RECORDED)
    today["packages"]["torch"] = "2.6.0"
    today["packages"]["sglang"] = "0.4.0"
    today["gpu"]["driver"] = "560.35"
    today["framework"]["packages"]["lmdeploy"] = "0.10.0"
    assert environment_changes(RECORDED, today) == [
        "sglang (none) -> 0.4.0", "torch 2.5.1 -> 2.6.0", "gpu driver 550.54 -> 560.35",
        "framework lmdeploy 0.9.0 -> 0.10.0"]


def test_the_framework_s_own_package_is_the_code_under_test():
    today = copy.deepcopy(RECORDED)
    today["packages"]["xtuner"] = "1.1.0"
    assert environment_changes(RECORDED, today, own_packages=("xtuner",)) == []
    assert environment_changes(RECORDED, today) == ["xtuner 1.0.0 -> 1.1.0"]


def test_a_golden_without_a_recorded_environment_compares_nothing():
    assert environment_changes(None, RECORDED) == []
    assert environment_changes("not a mapping", RECORDED) == []


def test_gpu_models_and_python_are_compared():
    today = copy.deepcopy(RECORDED)
    today["gpu"]["models"] = ["NVIDIA H200"]
    today["python"] = "3.12.1"
    assert environment_changes(RECORDED, today) == ["python 3.11.7 -> 3.12.1",
                                                    "gpu models [NVIDIA H100] -> [NVIDIA H200]"]
