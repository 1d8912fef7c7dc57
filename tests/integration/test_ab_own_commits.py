"""A project A/B-ing its own commits, end to end, as docs/ab.md shows it (scripts/ab_own_commits.py): a real git
repository of two commits on two branches, its case naming itself as ``platform.framework``; the golden and the
paired noise calibrated on ``main`` (the harness's ``optimizer-ulp:1`` nudge, no trainer edit), then ``ab --base main
--head halve-lr`` checks out each commit, runs both on one seed and fails the halved learning rate."""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from tests import waits
from tests.helpers import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("ab_own_commits", ROOT / "scripts" / "ab_own_commits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # eight 20-step tiny GRPO runs: 9 min at load 17 on 2 cores (docs/benchmarks.md)
def test_a_project_ab_of_its_own_two_commits(tmp_path: Path) -> None:
    flow = _script()
    root = flow.make_project(tmp_path)
    done = flow.run_flow(root, functools.partial(waits.run, limit_s=900))
    said = {args[0] + (" --paired" if "--paired" in args else ""): ran for args, ran in done}
    for name, ran in said.items():
        assert ran.returncode in (0, 1), f"{name}: {ran.stdout}{ran.stderr}"
    assert "promoted: " in said["calibrate"].stdout
    paired = said["calibrate --paired"]
    assert "nudged: optimizer-ulp:1" in paired.stdout and "agreed bitwise" not in paired.stderr
    assert "perturbation: optimizer-ulp:1" in (root / "accuracy" / "baselines" / "mini.yaml").read_text()
    noises = [line for line in paired.stdout.splitlines() if "A/A noise" in line]
    assert noises and any("A/A noise 0," not in line for line in noises)  # some window's pairs parted: it took
    ab = said["ab"]
    assert ab.returncode == 1 and "A/B mini: FAIL" in ab.stdout, ab.stdout + ab.stderr
    report = json.loads(next((root / "accuracy" / "results" / "mini").glob("ab-*/ab.json")).read_text())
    assert (report["base"], report["head"], report["status"]) == ("main", "halve-lr", "FAIL")
    shas = {side: subprocess.run(["git", "-C", str(root), "rev-parse", ref], capture_output=True, text=True,
                                 check=True).stdout.strip() for side, ref in (("base", "main"), ("head", "halve-lr"))}
    for side, sha in shas.items():  # each side ran its own commit's checkout
        results = next((root / "accuracy" / "results" / "mini").glob(f"ab-*/{side}-seed11/results.json"))
        assert json.loads(results.read_text())["context"]["commit"]["sha"] == sha
    assert not subprocess.run(["git", "-C", str(root), "status", "--porcelain", "train.py"], capture_output=True,
                              text=True).stdout  # the project's own checkout was never touched
