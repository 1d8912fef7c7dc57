"""A secret passed under a non-secret name (an env entry, a --fault argument) never reaches a results file or
the console, even when the training prints its whole environment and argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from autotest.inputs.case import REPO_ROOT
from autotest.redaction import forget_secrets
from tests.helpers import DATA

SECRET = "s3cr3t-value-4242-abcdef"
# the training prints its environment and argv, then runs the scripted stand-in
PRINTS_ENV = ("import os, sys, runpy; print(sorted(os.environ.items())); print(sys.argv, file=sys.stderr); "
              f"sys.argv = [sys.argv[0]] + sys.argv[1:]; runpy.run_path(r'{DATA / 'scripted_run.py'}', "
              "run_name='__main__')")


@pytest.fixture
def registry():
    forget_secrets()
    yield
    forget_secrets()


def test_a_secret_under_a_non_secret_name_is_masked_everywhere(tmp_path: Path, monkeypatch, capsys,
                                                                registry) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)  # a secret-named variable: its value is what is masked
    case = tmp_path / "leaky.yaml"
    case.write_text(f"""name: leaky
description: prints its environment
markers: []
goal: leak nothing
minimal_scale: one process
platform: {{gpus: 0, framework: null}}
inputs: {{}}
launch:
  command: ["{{python}}", -c, "{PRINTS_ENV}", --work-dir, "{{work_dir}}", --seed, "{{seed}}"]
  fault_args: [--fault, "{{fault}}"]
  env: {{MY_OPTION: "{SECRET}"}}
  timeout_s: 30  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 10, exact_steps: true}}
baseline: {REPO_ROOT}/tests/data/baselines/scripted.yaml
seed: {{default: 0}}
consistency: {{policy: off}}
""", encoding="utf-8")
    results = tmp_path / "results"
    code = main(["run", str(case), "--yes", "--no-history", "--results-dir", str(results),
                 "--fault", f"none:{SECRET}"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert SECRET not in captured.out + captured.err
    files = [p for p in results.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"card.md", "launch.json", "results.json", "report.md", "stdout.log", "stderr.log"} <= names
    leaked = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == []
    # the values were there to mask: the training printed them
    assert "***" in (next(p for p in files if p.name == "stdout.log")).read_text()
