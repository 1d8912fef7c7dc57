"""``calibrate`` resolves the code under test as ``run`` does, and its baseline names the commit its runs ran.

A framework repository of three commits made here (each halves the reward of the one before; HEAD is commit
3), the case naming the repository and no ref, and the framework's env variable pointing at a worktree of
commit 1: the runs check out what the resolution says, and the provenance is read from their preflight.json,
never from the variable.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from autotest.calibration.provenance import commit_the_runs_ran
from autotest.calibration.runs import RunRecord
from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case

TRAIN = """
import json, os, random, sys
seed = int(sys.argv[1])
rng = random.Random(seed)
exp = os.path.join(os.environ["WORK_DIR"], "logs", "exp_tracking")
os.makedirs(exp, exist_ok=True)
with open(os.path.join(exp, "tracker.jsonl"), "w") as log:
    for step in range(1, 6):
        log.write(json.dumps({"response/rewards/mean": REWARD * step + rng.gauss(0, 0.01), "step": step}) + "\\n")
"""

CASE = """name: fw-cal
description: a case whose code under test is a fetched framework ref
markers: [grpo]
goal: calibrate at the ref asked for
minimal_scale: five steps of a script
platform:
  gpus: 0
  framework: {{name: fakefw, env: FAKEFW_ROOT, repo: "{repo}"}}
launch:
  command: ["{{python}}", "${{FAKEFW_ROOT}}/train.py", "{{seed}}"]
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner}}
expected: {{steps: 5}}
baseline: ../baselines/fw-cal.yaml
seed: {{default: 0, calibration: [1, 2, 3]}}
"""

SPEC = """schema_version: 1
name: fw-cal
golden: {table: {}}
steps: {expected: 5, exact: true}
calibration: {runs: 3}
checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: placeholder}
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    repo = tmp_path / "fakefw"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for reward in (0.2, 0.1, 0.05):
        (repo / "train.py").write_text(TRAIN.replace("REWARD", str(reward)))
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-q", "-m", f"reward slope {reward}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    old = tmp_path / "fakefw-at-commit-1"
    _git(repo, "worktree", "add", "-q", "--detach", str(old), shas[0])
    (tmp_path / "cases").mkdir()
    (tmp_path / "baselines").mkdir()
    (tmp_path / "cases" / "fw-cal.yaml").write_text(CASE.format(repo=repo))
    (tmp_path / "baselines" / "fw-cal.yaml").write_text(SPEC)
    for name in ("RL_AUTOTEST_FRAMEWORK_REF", "RL_AUTOTEST_FRAMEWORK_REPO", "RL_AUTOTEST_HISTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RL_AUTOTEST_FRAMEWORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKEFW_ROOT", str(old))  # the variable points at commit 1: never what is recorded
    monkeypatch.chdir(tmp_path)
    return {"root": tmp_path, "shas": shas, "case": tmp_path / "cases" / "fw-cal.yaml"}


def _calibrate(project: dict, *flags: str) -> tuple[dict, list[str]]:
    root = project["root"]
    assert main(["calibrate", str(project["case"]), "--results-dir", str(root / "results"), *flags]) in (0, 1)
    candidate = load_baseline(root / "baselines" / "fw-cal.candidate.yaml")
    folder = root / candidate.provenance["results_dir"] if not Path(candidate.provenance["results_dir"]).is_absolute() \
        else Path(candidate.provenance["results_dir"])
    ran = [json.loads(p.read_text())["commit"]["sha"] for p in sorted(folder.glob("run*-seed*/preflight.json"))]
    return dict(candidate.provenance), ran


def test_calibrate_at_a_ref_records_the_commit_its_runs_ran(project: dict, capsys) -> None:
    provenance, ran = _calibrate(project, "--framework-ref", project["shas"][1])
    assert ran == [project["shas"][1]] * 3
    assert provenance["commit"]["sha"] == project["shas"][1] and provenance["commit"]["ref"] == project["shas"][1]
    assert provenance["commit"]["dirty"] is False and provenance["commit"]["repo"] == str(project["root"] / "fakefw")
    assert "--framework-ref " + project["shas"][1] in provenance["command"]
    out = capsys.readouterr().out
    # each run's own verdict against the placeholder baseline is shown as it is, never as a bare PASS
    assert "run 1 (seed 1): complete in " in out and "its verdict against the current baseline ERROR" in out
    assert ": PASS in " not in out


def test_without_a_ref_the_provenance_is_the_head_the_runs_ran_not_the_variable(project: dict) -> None:
    provenance, ran = _calibrate(project)
    assert ran == [project["shas"][2]] * 3  # the case's repository at HEAD, as `run` resolves it
    assert provenance["commit"]["sha"] == project["shas"][2] != project["shas"][0]


def test_a_ref_the_repository_lacks_is_one_line_before_any_run(project: dict, capsys) -> None:
    assert main(["calibrate", str(project["case"]), "--framework-ref", "no-such-branch",
                 "--results-dir", str(project["root"] / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-branch" in err[0] and "Traceback" not in err[0]
    assert not list((project["root"] / "results").glob("fw-cal/calibration-*"))


def test_runs_that_ran_different_commits_are_refused(tmp_path: Path) -> None:
    records = []
    for i, sha in enumerate(("a" * 40, "a" * 40, "b" * 40), start=1):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        (folder / "preflight.json").write_text(json.dumps({"commit": {"sha": sha, "dirty": False, "repo_dir": "."}}))
        records.append(RunRecord(i, i, folder, None, "PASS", (), 1.0))
    case = load_case("tiny-grpo")
    with pytest.raises(UsageError) as info:
        commit_the_runs_ran(case, records)
    assert str(info.value) == ("tiny-grpo: the calibration runs ran different commits (aaaaaaaaaaaa: run 1 (seed 1), "
                               "run 2 (seed 2); bbbbbbbbbbbb: run 3 (seed 3)); the ref moved between them: calibrate "
                               "again at one sha (--framework-ref SHA); nothing written")
    assert commit_the_runs_ran(case, records[:2])["sha"] == "a" * 40


def test_a_ref_with_from_history_is_refused(capsys) -> None:
    assert main(["calibrate", "tiny-grpo", "--from-history", "--framework-ref", "main"]) == 2
    assert capsys.readouterr().err.strip() == ("rl-autotest: error: --framework-ref: not with --from-history (it runs "
                                               "nothing: each recorded run names the commit it ran); drop one")
