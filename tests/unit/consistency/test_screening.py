from __future__ import annotations

import json
import math

import pytest

from autotest.consistency.screening import (
    check_recompute,
    load_run_config,
    screen,
    screen_run,
)
from autotest.errors import UsageError
from tests.helpers import write_tracker

HEALTHY = {"mismatch/mismatch_k3_kl": 2e-6, "mismatch/mismatch_logprob_abs_diff": 2e-3, "response/rewards/mean": 0.5}


def tracker(tmp_path, k3_by_step):
    summary = {s: {**HEALTHY, "mismatch/mismatch_k3_kl": v} for s, v in k3_by_step.items()}
    return write_tracker(tmp_path / "tracker.jsonl", summary)


def config(tmp_path, doc, name="config.json"):
    path = tmp_path / "run" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) if name.endswith(".json") else doc)
    return path


def test_breach_picks_the_first_breached_step_as_window(tmp_path):
    result = screen_run(
        tracker(tmp_path, {1: 2e-6, 2: 3e-6, 3: 1e-2, 4: 2e-2}), config(tmp_path, {"recompute_logprobs": True})
    )
    assert result.status == "breach" and result.first_breach_step == 3 and result.recompute == "confirmed"
    assert result.metrics == ("mismatch/mismatch_k3_kl", "mismatch/mismatch_logprob_abs_diff")
    assert result.per_step[3]["mismatch/mismatch_k3_kl"] == 1e-2
    assert result.breaches[0]["threshold_source"] == "screening default"
    assert result.to_dict()["window_step"] == 3


def test_healthy_run_is_no_breach_not_a_pass(tmp_path):
    result = screen_run(tracker(tmp_path, {1: 2e-6, 2: 3e-6}), config(tmp_path, {"recompute_logprobs": True}))
    assert result.status == "no_breach" and result.first_breach_step is None and result.reasons == ()


def test_harness_breaches_take_precedence(tmp_path):
    result = screen_run(
        tracker(tmp_path, {1: 2e-6, 2: 3e-6, 3: 1e-2}),
        config(tmp_path, {"recompute_logprobs": True}),
        breaches=[{"metric": "mismatch/mismatch_logprob_abs_diff", "first_breach_step": 2}],
    )
    assert result.first_breach_step == 2 and result.status == "breach"


def test_verl_yaml_config_and_rollout_corr_metrics():
    doc = {"actor_rollout_ref": {"rollout": {"calculate_log_probs": "true"}}}
    assert check_recompute(doc, "c.yaml") == (
        "confirmed",
        "c.yaml: actor_rollout_ref.rollout.calculate_log_probs = true",
    )
    series = {"rollout_corr/k3_kl": {1: 1e-6, 2: math.nan}, "rollout_corr/kl": {1: 0.0, 2: 0.0}}
    result = screen(series, doc, "c.yaml")
    assert result.status == "breach" and result.first_breach_step == 2  # NaN is a breach


def test_missing_recompute_is_inconclusive_even_with_a_breach(tmp_path):
    result = screen_run(tracker(tmp_path, {1: 1e-2}), config(tmp_path, {"recompute_logprobs": False}))
    assert result.status == "inconclusive" and result.recompute == "bypassed"
    assert "not recomputed" in result.reasons[0]
    assert result.first_breach_step == 1  # still reported: where to look, once the recompute is confirmed
    # verl's rollout_corr metrics exist with the recompute off: without its key the run cannot say
    result = screen({"rollout_corr/k3_kl": {1: 1e-2}}, {"lr": 1e-6}, "c.json")
    assert result.status == "inconclusive" and result.recompute == "unknown"
    assert "cannot confirm" in result.reasons[0] and result.first_breach_step == 1


def test_xtuner_always_on_mismatch_metrics_confirm_the_recompute(tmp_path):
    """xtuner has no recompute key: it recomputes every step and logs mismatch/mismatch_* from it."""
    result = screen_run(tracker(tmp_path, {1: 1e-6, 2: 1e-2}), config(tmp_path, {"rollout_backend": "lmdeploy"}))
    assert result.status == "breach" and result.recompute == "confirmed" and result.first_breach_step == 2
    assert "mismatch/mismatch_k3_kl" in result.recompute_evidence and "none of" in result.recompute_evidence
    result = screen_run(tracker(tmp_path, {1: 1e-6}), tmp_path / "absent.json")
    assert result.status == "no_breach" and result.recompute == "confirmed"


def test_missing_metrics_or_config_are_inconclusive(tmp_path):
    path = write_tracker(tmp_path / "t.jsonl", {1: {"response/rewards/mean": 0.5}})
    result = screen_run(path, config(tmp_path, {"recompute_logprobs": True}))
    assert result.status == "inconclusive" and "no consistency metric" in result.reasons[0]
    result = screen({"rollout_corr/k3_kl": {1: 1e-2}}, None, f"{tmp_path / 'absent.json'}: not found")
    assert (
        result.status == "inconclusive" and result.recompute == "unknown" and "not found" in result.recompute_evidence
    )
    series = {"mismatch/mismatch_logprob_abs_diff": {1: 0.5}}
    result = screen(series, {"recompute_logprobs": True}, "c.json")
    assert result.status == "inconclusive" and "thresholded metrics" in result.reasons[0]


def test_run_config_from_folder_and_yaml(tmp_path):
    path = config(tmp_path, "trainer:\n  recompute_logprobs: true\n", name="config.yaml")
    doc, found = load_run_config(path.parent)
    assert found == path and doc == {"trainer": {"recompute_logprobs": True}}
    bad = config(tmp_path, "a: [\n", name="run_config.yaml")
    with pytest.raises(UsageError, match=r"run_config.yaml:2: .*; fix the YAML syntax"):
        load_run_config(bad)
    with pytest.raises(UsageError, match="no saved run config"):
        load_run_config(tmp_path)
