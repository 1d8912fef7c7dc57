"""The MOPD case on a simulated 8-GPU xtuner node whose ``trunk`` lacks the recipe, as xtuner's main does.

The node is the simulated xtuner node (``xtuner_node.build_node``: fake ``nvidia-smi`` and ``ray``, the node's own
Python, shares, real teacher servers); ``recipe_checkout.add_refs`` adds a commit with pull request #1977's recipe
layout and ``refs/heads/trunk`` without ``recipe/on_policy_distillation/``. At trunk the nightly (pytest) and
``rl-autotest run`` report SKIP with the paths, the commit and the ref, and ``--strict-cases`` fails it; a case that
pins ``platform.framework.ref`` to the recipe's commit runs there, and its card and verdict say why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotest.inputs.project import PROJECT_ENV

from tests import waits
from tests.helpers import ROOT
from tests.integration.run.recipe_checkout import add_refs
from tests.integration.run.node_namespace import simulated_node

MOPD = "mopd-qwen3-vl-2b"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict]:
    with simulated_node(tmp_path) as built:  # the pinned run launches: the node's own process table
        built["recipe"], built["trunk"] = add_refs(built["repo"])
        yield built


def _pytest(node: dict, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pytest", str(ROOT / "autotest" / "suites" / "test_accuracy.py"), "-m", "mopd",
            "-k", MOPD, "--framework-repo", str(node["repo"]), "--framework-ref", "trunk", "--no-history",
            "--results-dir", str(node["tmp"] / "results"), "-p", "no:cacheprovider", "-q", "-rs", *extra]
    return waits.run(argv, cwd=ROOT, env=node["env"], capture_output=True, text=True, limit_s=300)


def _project_case(node: dict) -> Path:
    """The node's copy of the packaged MOPD case (xtuner_node.node_project), named by its file: by its bare name
    the copy and the packaged case would be two files of one name."""
    return Path(node["env"][PROJECT_ENV]) / "cases" / f"{MOPD}.yaml"


def _cli(node: dict, case: str) -> subprocess.CompletedProcess:
    enter = [*node["enter"], f"--wd={ROOT}"] if node["enter"] else []
    argv = [*enter, sys.executable, "-m", "autotest.cli", "run", case, "--framework-repo", str(node["repo"]),
            "--framework-ref", "trunk", "--results-dir", str(node["tmp"] / "results"), "--yes", "--no-history"]
    return waits.run(argv, cwd=ROOT, env=node["env"], capture_output=True, text=True, limit_s=300)


def test_a_recipe_not_merged_yet_is_a_skip_with_its_commit_and_ref(node):
    reason = (f"recipe/on_policy_distillation/ is not in xtuner at {node['trunk']} (trunk): not merged yet?")
    nightly = _pytest(node)
    assert nightly.returncode == 0 and "1 skipped" in nightly.stdout, nightly.stdout + nightly.stderr
    assert f"{MOPD}: {reason}" in nightly.stdout
    strict = _pytest(node, "--strict-cases")
    assert strict.returncode == 1, strict.stdout
    assert f"{MOPD} cannot run here (strict mode): {reason}" in strict.stdout
    # by its file: the node's project copies the packaged case (autotest/cases/), so its bare name would be two files
    cli = _cli(node, str(_project_case(node)))
    assert f"{MOPD}: SKIP — {reason}" in cli.stdout, cli.stdout + cli.stderr
    assert not (node["tmp"] / "results").exists() or not list((node["tmp"] / "results").rglob("results.json"))


def test_a_local_checkout_without_the_recipe_is_a_skip_naming_its_branch(node):
    # no ref asked: the run uses the clone $XTUNER_ROOT names, as it stands (here: trunk checked out)
    subprocess.run(["git", "-C", str(node["repo"]), "checkout", "-q", "trunk"], check=True)
    env = {**node["env"], "XTUNER_ROOT": str(node["repo"])}
    argv = [sys.executable, "-m", "autotest.cli", "run", str(_project_case(node)),
            "--results-dir", str(node["tmp"] / "results"),
            "--yes", "--no-history"]
    done = waits.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, limit_s=300)
    assert (f"{MOPD}: SKIP — recipe/on_policy_distillation/ is not in xtuner at {node['trunk']} (trunk): "
            "not merged yet?") in done.stdout, done.stdout + done.stderr


@pytest.mark.slow  # one real MOPD run on the simulated node (teacher servers, TensorBoard), 20-40 s on 2 cores
def test_a_case_pinned_to_a_commit_with_the_recipe_runs_there(node):
    text = _project_case(node).read_text()  # the packaged case with this node's /tmp and open-file limit
    text = text.replace("    env: XTUNER_ROOT\n", f"    env: XTUNER_ROOT\n    ref: {node['recipe']}\n")
    case = node["tmp"] / "cases" / f"{MOPD}.yaml"
    case.parent.mkdir()
    case.write_text(text)
    done = _cli(node, str(case))
    assert done.returncode == 0 and f"{MOPD}: PASS" in done.stdout, done.stdout + done.stderr
    (results,) = (node["tmp"] / "results").rglob("results.json")
    context = json.loads(results.read_text())["context"]
    why = f"the case's platform.framework.ref, since trunk ({node['trunk'][:12]}) lacks recipe/on_policy_distillation/"
    assert (context["framework"]["sha"], context["framework"]["origin"]) == (node["recipe"], why)
    for shown in ("card.md", "report.md"):
        assert f"(ref from {why})" in (results.parent / shown).read_text(), shown
    # the guard held the pinned commit's config to the case before launch, and recorded what it resolved
    assert context["recipe"]["problems"] == [] and context["recipe"]["resolved"]["train_batch_size"]["value"] == 128
