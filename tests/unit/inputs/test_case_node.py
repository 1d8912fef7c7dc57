"""A case's ``node:`` section: the xtuner cases declare what their scripts assume; each bad value is one line."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.case_node import NODE_KEYS, NodeRequirements
from tests.unit.inputs.test_case import write_case


def test_a_case_without_the_section_assumes_nothing(tmp_path):
    assert load_case(write_case(tmp_path)).node is None


def test_every_key_is_read(tmp_path):
    extra = ("node:\n  open_files: 4096\n  executables: [python, ray]\n  owned_paths: [/tmp/x]\n"
             "  exclusive_ray: true\n")
    assert load_case(write_case(tmp_path, extra=extra)).node == NodeRequirements(4096, ("python", "ray"), ("/tmp/x",),
                                                                                  exclusive_ray=True)


def test_every_declared_key_is_a_field_with_its_docstring():
    assert list(NODE_KEYS) == list(NodeRequirements.__dataclass_fields__)


def test_the_xtuner_cases_declare_what_their_launch_scripts_assume():
    # run_rl.sh at xtuner main b934f462: ulimit -n 65536 under set -e, bare python/ray, /tmp/ray_log re-linked,
    # ray stop --force; the MOPD launcher (PR #1977 head 0eea4a92) also uses absolute GPU ordinals
    grpo = load_case("grpo-gsm8k-qwen3-8b-lmdeploy").node
    assert grpo == NodeRequirements(65536, ("python", "ray"), ("/tmp/ray_log",), exclusive_ray=True)
    mopd = load_case("mopd-qwen3-vl-2b").node
    assert mopd == NodeRequirements(65536, ("python", "ray"), ("/tmp/ray_log",), exclusive_ray=True, whole_node=True)


@pytest.mark.parametrize("section,expected", [
    ("node: {open_files: lots}", "node.open_files: 'lots' is not a whole number; write the number the script "
                                 "passes to `ulimit -n`, e.g. 65536"),
    ("node: {open_files: 0}", "node.open_files: 0 is below 1; write the number the script passes to `ulimit -n`, "
                              "e.g. 65536"),
    ("node: {executables: [bin/ray]}", "node.executables[0]: 'bin/ray' is not a bare command name; write the name "
                                       "the script calls without a folder, e.g. python"),
    ("node: {executables: python}", "node.executables: 'python' is not a list; write [a, b] or one '- a' line each"),
    ("node: {owned_paths: [tmp/ray_log]}", "node.owned_paths[0]: 'tmp/ray_log' is not an absolute path; write the "
                                           "node-wide path as the script names it, e.g. /tmp/ray_log"),
    ("node: {exclusive_ray: yes please}", "node.exclusive_ray: 'yes please' is not true or false; write true or false"),
    ("node: {whole_node: true}", "node.whole_node: is true but platform.gpus is 0; set platform.gpus to the GPU count "
                                 "the script partitions, or remove whole_node"),
    ("node: {ulimit: 65536}", "node.ulimit: unknown key; allowed: open_files, executables, owned_paths, "
                              "exclusive_ray, whole_node"),
])
def test_a_bad_value_is_one_line_naming_the_key(tmp_path, section, expected):
    path = write_case(tmp_path, extra=section + "\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value) == f"{path}: {expected}"


def test_the_card_line_names_each_declared_precondition():
    assert NodeRequirements().describe() == "none declared"
    assert load_case("mopd-qwen3-vl-2b").node.describe() == (
        "hard open-file limit >= 65536; `python`, `ray` from the framework's Python on PATH; `/tmp/ray_log` absent "
        "or this user's; no other Ray cluster of this user; the GPU slot is the whole node")
