"""Bisect on a real git repository of a small framework whose training code is the embedded GRPO workload.

16 commits: refactors, comments, a change below the gates' MDE, one commit that does not run (skipped), one that
cuts the learning rate to a quarter (the regression the gate detects), harmless commits after it. A second
scenario changes the environment, not the code: the good ref fails today and the bisect says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.bisect.search import rounds_needed
from autotest.bisect.session import ENVIRONMENT, FOUND, BisectOptions, bisect
from autotest.inputs.case import load_case
from autotest.run.framework import CACHE_ENV, REF_ENV, REPO_ENV
from tests.helpers import ROOT
from tests import waits

pytestmark = pytest.mark.slow

TRAIN = '''"""tinyfw: a framework whose trainer is the embedded GRPO workload, configured by settings.json."""
import json, os, sys
from pathlib import Path

settings = json.loads((Path(__file__).parent / "settings.json").read_text())
fault = os.environ.get("TINYFW_ENV_FAULT") or settings.get("fault", "")  # an environment change, not a commit
args = [sys.executable, "-m", "autotest.workloads.grpo", *sys.argv[1:]] + (["--fault", fault] if fault else [])
os.execv(sys.executable, args)
'''

CASE = """name: tinyfw
description: the tiny framework's GRPO gate
markers: [grpo]
goal: find the commit that broke the framework's training
minimal_scale: the embedded GRPO workload, 45 steps
platform:
  gpus: 0
  framework: {{name: tinyfw, env: TINYFW_ROOT, repo: "{repo}"}}
launch:
  command: ["{{python}}", "${{TINYFW_ROOT}}/train.py", --work-dir, "{{work_dir}}", --seed, "{{seed}}"]
  env: {{PYTHONUNBUFFERED: "1"}}
  timeout_s: 900
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 45, exact_steps: true}}
baseline: {baseline}
seed: {{default: 5, calibration: [0, 1, 2, 3, 4]}}
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@x", "GIT_COMMITTER_NAME": "dev",
           "GIT_COMMITTER_EMAIL": "dev@x"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, subject: str, *, fault: str | None = None, train: str | None = None,
            note: str | None = None) -> str:
    if fault is not None:
        (repo / "settings.json").write_text(json.dumps({"fault": fault}))
    if train is not None:
        (repo / "train.py").write_text(train)
    if note is not None:
        with (repo / "NOTES.md").open("a") as handle:
            handle.write(note + "\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


def build_framework(root: Path) -> tuple[Path, list[str], str]:
    """The 16-commit repository under ``root`` and its case file ``root/tinyfw.yaml``:
    (repository, the good commit and the 16 after it, the culprit)."""
    repo = root / "tinyfw"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    good = _commit(repo, "tinyfw 1.0", fault="", train=TRAIN, note="# tinyfw")
    plan = [("docs: describe the settings", {"note": "settings.json holds the trainer's options"}),
            ("refactor: name the launcher's arguments", {"train": TRAIN.replace("args = [", "launch = args = [")}),
            ("comment the fault switch", {"train": TRAIN.replace("import json", "# stdlib only\nimport json")}),
            ("wip: broken import", {"train": "import json\nthis is not python\n"}),
            ("fix the broken import", {"train": TRAIN}),
            ("tune: learning rate x0.97 (below the MDE)", {"fault": "lr-scale:0.97"}),
            ("docs: changelog", {"note": "- lr tuned"}),
            ("revert the lr tuning", {"fault": ""}),
            ("optimiser: new default learning rate", {"fault": "lr-scale:0.25"}),
            ("docs: mention the new default", {"note": "- new lr default"}),
            ("refactor: tidy train.py", {"train": TRAIN.replace("# an environment change", "# env change")}),
            ("docs: typo", {"note": "- typo"}),
            ("ci: nothing that runs", {"note": "- ci"}),
            ("docs: release notes", {"note": "- 1.1"}),
            ("refactor: argv", {"train": TRAIN.replace("*sys.argv[1:]", "*list(sys.argv[1:])")}),
            ("tinyfw 1.1", {"note": "# 1.1"})]
    commits = [_commit(repo, subject, **change) for subject, change in plan]
    (root / "tinyfw.yaml").write_text(CASE.format(repo=repo, baseline=ROOT / "baselines" / "tiny-grpo.yaml"))
    return repo, [good, *commits], commits[8]


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str], str]:
    """(repository, the 16 commits after the good one, the culprit)."""
    built = build_framework(tmp_path)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    for name in (REPO_ENV, REF_ENV, "TINYFW_ENV_FAULT"):
        monkeypatch.delenv(name, raising=False)
    return built


def _leftovers(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


def test_bisect_names_the_commit_that_cut_the_learning_rate(framework, tmp_path: Path) -> None:
    repo, commits, culprit = framework
    case = load_case(tmp_path / "tinyfw.yaml")
    lines: list[str] = []
    outcome = bisect(case, BisectOptions(good=commits[0], bad="main", slots=2, results_root=tmp_path / "results",
                                         progress=lines.append))
    assert outcome.status == FOUND, "\n".join(lines)
    assert outcome.first_bad is not None and outcome.first_bad.sha == culprit
    assert outcome.first_bad.subject == "optimiser: new default learning rate" and outcome.first_bad.author == "dev"
    assert outcome.last_good == commits[8]  # "revert the lr tuning"
    assert outcome.flipped and all(row["bad"] is not None for row in outcome.flipped)
    skipped = {p.commit for p in outcome.probes if p.answer == "skipped"}
    assert skipped <= {commits[4]}  # only the commit that does not run is ever skipped
    assert outcome.rounds <= rounds_needed(16, 2) + 1  # multisection: log3(16) rounds, one more for a skip
    data = json.loads((outcome.folder / "bisect.json").read_text())
    assert data["first_bad"]["sha"] == culprit and data["confidence"] in ("high", "medium")
    assert {p["commit"] for p in data["probes"]} >= {culprit, commits[8]}
    assert "first bad commit" in (outcome.folder / "bisect.md").read_text()
    assert _leftovers(str(tmp_path)) == []


def test_the_environment_changed_not_the_code(framework, tmp_path: Path, monkeypatch) -> None:
    repo, commits, _ = framework
    monkeypatch.setenv("TINYFW_ENV_FAULT", "lr-scale:0.25")  # a new image: every commit trains slower now
    result = waits.run([sys.executable, "-m", "autotest.cli", "bisect", str(tmp_path / "tinyfw.yaml"),
                        "--good", commits[0], "--bad", "main", "--results-dir", str(tmp_path / "results")],
                       capture_output=True, text=True, limit_s=600, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"bisect: {ENVIRONMENT}: the environment changed, not the code: the good ref {commits[0]} fails today" \
        in result.stdout
    assert "0 round(s), 2 run(s)" in result.stdout
    # the commits between only re-tune what the environment now overrides: the two ends train alike, paired
    assert "the good and the bad ref train alike within the A/A noise" in result.stdout
    assert _leftovers(str(tmp_path)) == []
