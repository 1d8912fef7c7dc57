"""A tier's real run: tiny-grpo's ``pr`` tier trains steps 1-30 of 45, is judged on the gates those steps hold, and
its verdict states what it gave up; the history records it as a ``tier`` run, never trusted."""

from __future__ import annotations

import json

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case


@pytest.mark.slow  # one real 30-step GRPO run, about 20 s on 2 cores
def test_the_pr_tier_trains_30_steps_judges_what_they_hold_and_says_what_it_gave_up(tmp_path) -> None:
    case = load_case("tiny-grpo")
    # a seed no calibration run used: at the default seed 0 (a calibration run, bitwise) the gates were made to
    # cover this very run, and its PASS could not show a false alarm (a baseline with the gates fitted to the
    # seed-0 run passed it; at this seed 3 of its 4 fitted gates fail)
    fresh = max(case.seed.calibration) + 1
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path, tier="pr", seed=fresh),
                                    publish=PublishOptions(with_plots=False)))
    assert run.status == "PASS", run.summary_line()
    results = {r.check_id: r for r in run.verdict.results}
    assert results["response/rewards/mean[pooled 16-30]"].status == "PASS"
    assert results["mismatch/mismatch_k3_kl[stepwise]"].status == "PASS"
    assert not {"response/rewards/mean[pooled 31-45]", "eval/accuracy[final]"} & set(results)
    tier = results["tier[pr]"]
    assert tier.status == "INFO" and tier.message.startswith("pr tier, 30 of 45 steps: not judged: ")
    saved = json.loads((run.results_dir / "results.json").read_text())
    assert saved["context"]["kind"] == "tier" and saved["context"]["tier"]["steps"] == 30
    tracker = sorted(run.results_dir.glob("work/**/tracker.jsonl"))
    steps = [json.loads(line).get("step") for line in tracker[0].read_text().splitlines() if line.strip()]
    assert max(s for s in steps if isinstance(s, int)) == 30  # the workload stopped at the tier's last step


@pytest.mark.slow  # one real 15-step MOPD run with its two teacher servers, about 20 s on 2 quiet cores
def test_tiny_mopd_s_pr_tier_runs_one_seed_judges_the_points_it_holds_and_states_the_mde_given_up(tmp_path) -> None:
    case = load_case("tiny-mopd")
    assert case.replicates == 2  # the full run's: the tier runs one seed all the same
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path, tier="pr"),
                                    publish=PublishOptions(with_plots=False)))
    assert run.status == "PASS", run.summary_line()
    results = {r.check_id: r for r in run.verdict.results}
    assert results["distillation/reduced_distillation_kl[points]"].points.steps == (1, 5, 10, 15)
    assert results["eval/digit_sum/acc[points]"].points.steps == (0, 5, 10, 15)
    assert not any("pooled" in check_id for check_id in results)
    statement = results["tier[pr]"].message
    assert statement.startswith("pr tier, 15 of 25 steps: not judged: "
                                "distillation/reduced_distillation_kl[pooled 1-25], ")
    assert "distillation/reduced_distillation_kl[points] at steps 20/25" in statement
    # the MDE given up, at one seed: the pooled window's against the points gate's
    assert "distillation/reduced_distillation_kl ±0.67 instead of ±0.11" in statement
    assert "response/rewards/mean: no gate judged (the full run's best ±0.045)" in statement
    tracker = sorted(run.results_dir.glob("work/**/tracker.jsonl"))
    assert len(tracker) == 1  # one seed, no replicate folders
    steps = [json.loads(line).get("step") for line in tracker[0].read_text().splitlines() if line.strip()]
    assert max(s for s in steps if isinstance(s, int)) == 15
