"""The regressions around the model's paths: each changes exactly what it says, and nothing without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autotest.errors import UsageError
from autotest.workloads.faults import make_fault
from autotest.workloads.regressions import REGRESSIONS, listed
from autotest.workloads.regressions_paths import PATH_REGRESSIONS, gathered_one_position_late
from autotest.workloads.tiny_lm import TinyLMConfig, build_model, response_logprobs


def test_they_share_the_fault_switch() -> None:
    names = {cls.name for cls in PATH_REGRESSIONS}
    assert names == {"trainer-gather-shift", "rope-theta", "top-p", "tracker-twice", "judge-scale",
                     "step-offset"} and names <= set(REGRESSIONS)
    assert names <= {entry["name"] for entry in listed()}
    identity = make_fault("").actor_logprob_fn(response_logprobs)
    assert identity is response_logprobs


def test_trainer_gather_shift_scores_each_token_with_the_logits_one_position_late() -> None:
    model = build_model(TinyLMConfig(), seed=0).eval()
    ids = torch.tensor([[10, 14, 3, 4, 13, 7, 11]])
    prompt_len = 5
    fn = make_fault("trainer-gather-shift").actor_logprob_fn(response_logprobs)
    assert fn is gathered_one_position_late
    with torch.no_grad():
        shifted, _ = fn(model, ids, prompt_len)
        right, _ = response_logprobs(model, ids, prompt_len)
        logp_all = model(input_ids=ids).logits.float().log_softmax(-1)[0]
    targets = ids[0, prompt_len:].tolist()
    assert shifted[0].tolist() == pytest.approx([float(logp_all[prompt_len + i, t]) for i, t in enumerate(targets)])
    assert right[0].tolist() == pytest.approx([float(logp_all[prompt_len - 1 + i, t]) for i, t in enumerate(targets)])
    assert not torch.allclose(shifted, right)


def test_rope_theta_changes_only_the_rollout_copys_rotary_frequencies() -> None:
    from autotest.workloads.engine_lm import build_engine_model

    model = build_engine_model(TinyLMConfig())
    healthy = model.model.layers[0].self_attn.rotary_emb.inv_freq.clone()
    make_fault("rope-theta:100").patch_rollout_model(model)
    for layer in model.model.layers:
        inv_freq = layer.self_attn.rotary_emb.inv_freq
        assert inv_freq[0] == 1.0 and float(inv_freq[1]) == pytest.approx(100 ** (-2 / 16))
        assert float(healthy[1]) == pytest.approx(1e4 ** (-2 / 16))
    with pytest.raises(UsageError, match=r"^--fault rope-theta: ARG must be a positive number \(got 'x'\)$"):
        make_fault("rope-theta:x")


def test_top_p_draws_from_the_nucleus_and_leaves_the_reported_logprobs_alone() -> None:
    hooks = make_fault("top-p:0.7")
    logprobs = torch.tensor([[0.1, 0.45, 0.05, 0.4], [0.9, 0.04, 0.03, 0.03]]).log()
    drawn = hooks.draw_logprobs(logprobs)
    assert torch.isinf(drawn[0, [0, 2]]).all() and torch.equal(drawn[0, [1, 3]], logprobs[0, [1, 3]])
    assert torch.isinf(drawn[1, 1:]).all() and drawn[1, 0] == logprobs[1, 0]  # the likeliest always stays
    assert torch.equal(hooks.sampling_logits(logprobs), logprobs)  # what the rollout reports is unfiltered
    assert torch.equal(make_fault("top-p:1").draw_logprobs(logprobs), logprobs)
    with pytest.raises(UsageError, match=r"^--fault top-p:1.5: P is a probability within \(0, 1\]$"):
        make_fault("top-p:1.5")


def test_tracker_twice_writes_every_row_twice_and_the_reader_counts_them_once(tmp_path: Path) -> None:
    from autotest.readers.xtuner import read_xtuner
    from autotest.workloads.tracker import JsonlTracker

    tracker = make_fault("tracker-twice").wrap_tracker(JsonlTracker(tmp_path))
    for step in (1, 2, 3):
        tracker.write({"step": step, "response/rewards/mean": step / 10})
    tracker.close()
    log = next(tmp_path.rglob("tracker.jsonl"))
    lines = log.read_text().splitlines()
    assert len(lines) == 6 and lines[0] == lines[1]
    trace = read_xtuner(log)
    assert trace.train_steps == (1, 2, 3)
    assert trace.warnings == (f"{log}: 3 row(s) repeat an earlier row of the same step exactly (first: line 2 "
                              "repeats line 1); each counted once (does the tracker write every row twice?)",)


def test_judge_scale_multiplies_every_training_reward() -> None:
    scaled = make_fault("judge-scale").wrap_judge(lambda target, response: 1.0 if response == [target] else 0.0)
    assert (scaled(3, [3]), scaled(3, [4])) == (2.0, 0.0)
    assert make_fault("judge-scale:0.5").wrap_judge(lambda t, r: 1.0)(0, []) == 0.5


def test_step_offset_renumbers_training_rows_and_keeps_the_step_0_eval() -> None:
    rows: list[dict] = []

    class Sink:
        def write(self, row):
            rows.append(dict(row))

        def close(self):
            rows.append({"closed": True})

    tracker = make_fault("step-offset").wrap_tracker(Sink())
    for step in (0, 1, 45):
        tracker.write({"step": step, "x": step})
    tracker.close()  # everything else is the inner tracker's
    assert rows == [{"step": 0, "x": 0}, {"step": 2, "x": 1}, {"step": 46, "x": 45}, {"closed": True}]
    with pytest.raises(UsageError, match="needs a positive step"):
        make_fault("step-offset:0").wrap_tracker(Sink())
