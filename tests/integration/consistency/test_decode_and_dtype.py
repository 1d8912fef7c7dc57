"""The consistency job names the decode path and the recompute dtype (issue 30): the real job, real MSProbe dumps.

``decode-positions`` gives the rollout's decode forwards position ids one too high after the first decoded token:
every prefill forward (all the dumps, the trainer's recompute) is right, so only the recorded log-probs split by
what scored the token, and the KV-cache path the sampler recorded, can show it. ``recompute-dtype`` runs the
trainer's recompute under bf16 autocast against an fp32 rollout: the module statistics agree within bf16's
rounding, and only the dumps' dtypes (and the hook's autocast state) name it.
"""

from __future__ import annotations

import json

import pytest

from autotest.consistency.job import run_consistency_job
from autotest.workloads.faults import catalogue
from tests.integration.consistency.test_job import accuracy_results

EXPECTED = {f["name"]: f["expected"]["consistency"] for f in catalogue() if "consistency" in f["expected"]}
PROMPT_LEN = 4  # the tiny GRPO task's prompts: the first response token sits at position 4


def _job(tmp_path, fault: str, divergence: str):  # noqa: ANN001, ANN202
    """The real consistency job on a short accuracy run with ``fault``, held to the fault's documented bucket and
    module: (its outcome, output_5 as a dict, its root cause, the documented finding)."""
    expected = EXPECTED[fault]
    outcome = run_consistency_job(accuracy_results(tmp_path, fault))
    assert outcome.executed and outcome.verdict == "root_cause_found", outcome.summary
    report = json.loads(outcome.report_json.read_text())
    cause = report["root_cause"]
    assert (report["divergence"], cause["bucket"], cause["module"]) == (divergence, expected["bucket"],
                                                                        expected["module"])
    return outcome, report, cause, expected


@pytest.mark.slow
def test_decode_position_ids_off_by_one_are_named_the_decode_path_at_the_first_decode_forward(tmp_path) -> None:
    outcome, report, cause, expected = _job(tmp_path, "decode-positions", "decode_path")
    # the first response token (scored by the prefill) agrees; the divergence starts at the next one
    assert (cause["onset_phase"], cause["onset_index"]) == (expected["onset_phase"], expected["onset_index"])
    assert cause["onset_position"] == PROMPT_LEN + 1
    sampling = report["logprob_comparison"]["pairs"][0]
    phases = {p["phase"]: p for p in sampling["phases"]}
    assert phases["prefill"]["status"] == "agrees" and phases["prefill"]["k3"] < 1e-12
    assert phases["first_decode"]["status"] == phases["later_decode"]["status"] == "diverges"
    assert report["logprob_comparison"]["pairs"][1]["status"] == "agrees"  # the two models' forwards agree
    # the sampler's own KV-cache path shows the offset: position id 5 where 4 was due, cache lengths right
    kv = report["logprob_comparison"]["kv_path"]
    assert kv["position_id_off"] > 0 and kv["cache_length_off"] == 0
    first = kv["first_position_id_off"][0]
    assert (first["position"], first["position_id"], first["index"]) == (PROMPT_LEN + 1, PROMPT_LEN + 1, 1)
    assert "position id 5, expected 4" in cause["why"]
    assert not any("temperature" in c for c in report["next_checks"])
    assert "decode forwards" in report["next_checks"][0] and "position ids" in report["next_checks"][0]
    markdown = outcome.report_md.read_text()
    assert "divergence: **decode_path**" in markdown and "| sampling_path | first_decode | diverges |" in markdown
    assert "the model's forward is the same" not in markdown and "decode_path" in outcome.summary


@pytest.mark.slow
def test_a_recompute_under_bf16_autocast_is_named_a_precision_cause_with_its_modules_and_dtypes(tmp_path) -> None:
    outcome, report, cause, expected = _job(tmp_path, "recompute-dtype", "precision")
    assert cause["side"] == expected["side"] and cause["dtypes"] == expected["dtypes"]
    # the projections are where bf16 starts (autocast casts matmuls); the weights stay fp32: autocast's signature
    assert cause["first_module"].startswith("model.layers.0.self_attn.")
    assert any(m.endswith("mlp.down_proj") for m in cause["modules"]) and cause["autocast"] is True
    assert cause["autocast_seen"] == {"actor": ["torch.bfloat16"], "rollout": ["off"]}  # what the hook saw
    assert "after_model" not in json.dumps(cause)
    assert "torch.bfloat16" in cause["why"] and "torch.float32" in cause["why"]
    sampling, model, _ = report["logprob_comparison"]["pairs"]
    assert sampling["status"] == "agrees" and model["status"] == "diverges"
    assert "autocast" in report["next_checks"][0]
    markdown = outcome.report_md.read_text()
    assert "divergence: **precision**" in markdown and "- dtypes: actor `torch.bfloat16`, rollout `torch.float32`" \
        in markdown
    assert "precision_mismatch" in outcome.summary and "torch.bfloat16" in outcome.summary
