"""A launcher that stops passing the seed to training: the run's saved config says so, and the verdict is an
ERROR "seed not honoured", never a silent PASS."""

from __future__ import annotations

from pathlib import Path

from autotest.inputs.case import load_case
from autotest.judge.model import ERROR
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
from tests.helpers import DATA, ROOT

CASE = f"""name: seedless
description: the scripted run, its launcher passing a fixed seed whatever it is given
markers: []
goal: catch a dropped seed
minimal_scale: one process writing 10 steps
platform: {{gpus: 0, framework: null}}
launch:
  command: ["{{python}}", {DATA / 'scripted_run.py'}, --work-dir, "{{work_dir}}", --seed, "0"]
  timeout_s: 30  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 10, exact_steps: true}}
baseline: {ROOT / 'tests' / 'data' / 'baselines' / 'scripted.yaml'}
seed: {{default: 0, env: SEED}}
consistency: {{policy: "off"}}
"""


def test_a_run_whose_config_names_another_seed_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "seedless.yaml"
    path.write_text(CASE)
    run = run_case(load_case(path), RunOptions(LaunchOptions(results_root=tmp_path / "results", seed=11),
                                               publish=PublishOptions(with_plots=False)))
    assert run.verdict is not None and run.status == ERROR
    seed = next(r for r in run.verdict.results if r.check_id == "run[seed]")
    assert seed.status == ERROR
    assert seed.message.startswith("seed not honoured: seed 11 was asked for but the run's saved config says 0")
    # the same launcher at the seed it hard-codes is fine
    fine = run_case(load_case(path), RunOptions(LaunchOptions(results_root=tmp_path / "results", seed=0),
                                                publish=PublishOptions(with_plots=False)))
    assert fine.status == "PASS", fine.summary_line()
