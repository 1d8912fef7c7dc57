"""Judging the node against a case's ``node:`` section, on hand-made facts (the probing is tested on a real node in
tests/integration/run/test_node_probe.py and on the simulated xtuner node)."""

from __future__ import annotations

from dataclasses import replace

from autotest.inputs.case_node import NodeRequirements
from autotest.run.node_preconditions import (
    Executable,
    GpuSlot,
    NodeFacts,
    PathOwner,
    RayDaemon,
    node_error,
    unmet,
)

REQ = NodeRequirements(65536, ("python", "ray"), ("/tmp/ray_log",), exclusive_ray=True, whole_node=True)
ENV = "/envs/xtuner"
GOOD = NodeFacts(
    uid=1000, open_files_hard=1048576, can_raise_limits=False, framework_python=f"{ENV}/bin/python3",
    framework_prefix=ENV,
    executables=(Executable("python", f"{ENV}/bin/python", f"{ENV}/bin/python", ENV),
                 Executable("ray", f"{ENV}/bin/ray", f"{ENV}/bin/python3", ENV)),
    paths=(PathOwner("/tmp/ray_log", None),), ray_daemons=(),
    gpus=GpuSlot(8, "nvidia-smi", None, None))


def test_a_node_as_the_script_assumes_has_nothing_unmet():
    assert unmet(REQ, GOOD, 8) == []
    assert unmet(REQ, replace(GOOD, paths=(PathOwner("/tmp/ray_log", 1000, "ci"),)), 8) == []  # its own link
    assert node_error("c.yaml", []) is None


def test_a_node_breaking_every_precondition_gets_one_line_naming_each_with_its_fix():
    bad = replace(
        GOOD, open_files_hard=4096,
        executables=(Executable("python", None),
                     Executable("ray", "/usr/local/bin/ray", "/usr/bin/python3", "/usr")),
        paths=(PathOwner("/tmp/ray_log", 4242, "alice"),),
        ray_daemons=(RayDaemon(77, "gcs_server", "gcs_server --gcs_server_port=6379"),
                     RayDaemon(78, "raylet", "raylet --gcs-address=127.0.0.1:6379")),
        gpus=GpuSlot(16, "nvidia-smi", "0,1,2,3,4,5,6,7", None))
    problems = unmet(REQ, bad, 8)
    assert len(problems) == 6
    line = node_error("cases/mopd.yaml", problems)
    assert "\n" not in line
    assert line.startswith("cases/mopd.yaml: node: 6 preconditions of the launch script unmet, nothing launched: (1) ")
    for expected in (
            "open files: the hard limit of the launching process is 4096, the script runs `ulimit -n 65536` under "
            "`set -e`, which fails below it; raise the runner service's hard limit to 65536",
            f"`python`: not on the run's PATH, and the script calls it bare; add a `python` link to {ENV}/bin/python3 "
            f"in {ENV}/bin",
            f"`ray`: the run's PATH finds /usr/local/bin/ray, which runs in /usr, not in the framework's python "
            f"{ENV}/bin/python3 ({ENV}); install `ray` in that environment",
            "/tmp/ray_log: owned by uid 4242 (alice), not by this runner's uid 1000, and the script deletes and "
            "re-links it; have its owner remove it",
            "Ray: a cluster this run did not start is running as this user (gcs_server pid 77, raylet pid 78); the "
            "script's `ray stop --force` would kill it",
            "GPUs: the script places its processes on absolute GPU ordinals of the whole node, but its GPU slot is "
            "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 of the node's 16 GPUs (nvidia-smi); run it on a node with exactly "
            "8 GPUs"):
        assert expected in line, expected


def test_a_missing_command_without_a_named_framework_python_is_still_unmet():
    facts = replace(GOOD, framework_python=None, framework_prefix=None, executables=(Executable("ray", None),))
    (problem,) = unmet(replace(REQ, whole_node=False), facts, 8)
    assert problem == ("`ray`: not on the run's PATH, and the script calls it bare; install it in the framework's "
                       "python or put the folder that holds it on PATH")


def test_a_process_that_may_raise_its_own_limit_passes_the_open_file_check():
    assert unmet(REQ, replace(GOOD, open_files_hard=4096, can_raise_limits=True), 8) == []
    assert unmet(REQ, replace(GOOD, open_files_hard=None), 8) == []  # unlimited


def test_an_executable_whose_python_cannot_be_told_is_unmet_unless_no_framework_python_is_named():
    wrapped = (Executable("python", f"{ENV}/bin/python", f"{ENV}/bin/python", ENV),
               Executable("ray", "/opt/bin/ray", None, None, "its first line '#!/bin/bash' names no Python"))
    (problem,) = unmet(REQ, replace(GOOD, executables=wrapped), 8)
    assert problem.startswith("`ray`: the run's PATH finds /opt/bin/ray, but which Python it runs cannot be told "
                              "(its first line '#!/bin/bash' names no Python)")
    assert unmet(REQ, replace(GOOD, executables=wrapped, framework_python=None, framework_prefix=None), 8) == []


def test_a_gpu_slot_is_the_whole_node_only_when_nothing_narrows_it():
    def slot(**changes):
        return unmet(REQ, replace(GOOD, gpus=replace(GOOD.gpus, **changes)), 8)

    assert slot(inherited_visible="0,1,2,3,4,5,6,7") == []  # every GPU listed: not narrowed
    (inherited,) = slot(node_gpus=16, inherited_visible="8,9,10,11,12,13,14,15")
    assert "the runner's environment narrows it (CUDA_VISIBLE_DEVICES=8,9,10,11,12,13,14,15)" in inherited
    (bigger,) = slot(node_gpus=16)
    assert "the node has 16 GPUs (nvidia-smi), the case 8" in bigger
    assert unmet(replace(REQ, whole_node=False), replace(GOOD, gpus=None), 8) == []


def test_a_framework_python_that_does_not_run_is_unmet_not_skipped():
    broken = replace(GOOD, framework_prefix=None, framework_note="/envs/gone/bin/python3 did not run (exit code 127)")
    problems = unmet(replace(REQ, whole_node=False), broken, 8)
    assert problems == ["the framework's python: /envs/gone/bin/python3 did not run (exit code 127), so which "
                        "environment the script's bare commands must run in cannot be told; point FRAMEWORK_PYTHON "
                        "(or launch.python) at it"]
