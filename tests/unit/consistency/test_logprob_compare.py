"""The three-way log-prob comparison and the verdict it gives, on small hand-made records."""

from __future__ import annotations

import math

import pytest

from autotest.consistency.logprob_compare import (
    K3_DIVERGES_BF16,
    K3_DIVERGES_FP32,
    NOT_PROVIDED,
    compare_logprobs,
    not_checked,
)
from autotest.consistency.logprob_records import LogprobRecord
from autotest.consistency.logprob_verdict import classify_divergence, with_logprob_finding
from autotest.consistency.verdict import RootCauseReport, Step

TOKENS = (7, 3, 11, 2)
BASE = (-0.4, -1.3, -2.2, -0.05)


def _records(kind: str, values: tuple[float, ...], samples: int = 2, tokens: tuple[int, ...] = TOKENS,
             dtype: str | None = None):
    return [LogprobRecord(kind, 5, s, f"step5-p0-s{s}", tuple(range(4, 4 + len(values))), tokens, values, dtype,
                          f"{kind}.jsonl:{s + 1}") for s in range(samples)]


def _hot(values: tuple[float, ...], temperature: float) -> tuple[float, ...]:
    """Log-probs of the same tokens under a temperature, over a 2-token distribution (enough to move them)."""
    out = []
    for v in values:
        p = math.exp(v)
        a, b = math.log(p) / temperature, math.log(1 - p) / temperature
        out.append(a - math.log(math.exp(a) + math.exp(b)))
    return tuple(out)


def test_identical_paths_agree_exactly() -> None:
    result = compare_logprobs({k: _records(k, BASE) for k in ("recorded", "recomputed", "trainer")})
    assert result.finding == "aligned"
    assert all(p.status == "agrees" and p.tokens == 8 and p.k3 == 0.0 and p.max_abs_diff == 0.0 for p in result.pairs)


def test_a_sampling_temperature_is_a_sampling_path_divergence() -> None:
    result = compare_logprobs({"recorded": _records("recorded", _hot(BASE, 1.3)),
                               "recomputed": _records("recomputed", BASE), "trainer": _records("trainer", BASE)})
    assert result.finding == "sampling_path"
    sampling, model, end = result.pairs
    assert (sampling.status, model.status, end.status) == ("diverges", "agrees", "diverges")
    diffs = [b - a for a, b in zip(_hot(BASE, 1.3), BASE, strict=True)]
    assert sampling.k3 == pytest.approx(sum(math.exp(d) - d - 1 for d in diffs) / 4)
    assert sampling.max_abs_diff == pytest.approx(max(map(abs, diffs)))
    worst = sampling.worst_tokens[0]  # the token with the largest |diff|, with all three values
    i = max(range(4), key=lambda j: abs(diffs[j]))
    assert (worst.position, worst.token_id) == (4 + i, TOKENS[i])
    assert worst.values == {"recorded": _hot(BASE, 1.3)[i], "recomputed": BASE[i], "trainer": BASE[i]}


def test_a_model_difference_is_not_a_sampling_path_divergence() -> None:
    shifted = tuple(v - 0.05 for v in BASE)
    result = compare_logprobs({"recorded": _records("recorded", BASE), "recomputed": _records("recomputed", BASE),
                               "trainer": _records("trainer", shifted)})
    assert result.finding == "model"
    assert [p.status for p in result.pairs] == ["agrees", "diverges", "diverges"]


def test_noise_below_the_threshold_agrees() -> None:
    # bf16-sized noise: |d| 2e-3 gives k3 ~ 2e-6, below the threshold
    noisy = tuple(v + (2e-3 if i % 2 else -2e-3) for i, v in enumerate(BASE))
    result = compare_logprobs({"recorded": _records("recorded", BASE), "recomputed": _records("recomputed", noisy),
                               "trainer": _records("trainer", noisy)})
    assert result.pair("sampling_path").k3 < K3_DIVERGES_BF16 and result.finding == "aligned"


def test_fp32_on_both_sides_tolerates_only_fp32_rounding() -> None:
    # |d| 2e-4 (k3 2e-8): far above fp32 rounding (k3 ~1e-14), far below bf16 noise (~2e-6)
    shifted = tuple(v - 2e-4 for v in BASE)
    fp32 = compare_logprobs({"recomputed": _records("recomputed", BASE, dtype="fp32"),
                             "trainer": _records("trainer", shifted, dtype="fp32")})
    bf16 = compare_logprobs({"recomputed": _records("recomputed", BASE, dtype="low"),
                             "trainer": _records("trainer", shifted, dtype="fp32")})
    unknown = compare_logprobs({"recomputed": _records("recomputed", BASE), "trainer": _records("trainer", shifted)})
    assert fp32.pair("model").status == "diverges" and fp32.pair("model").k3_threshold == K3_DIVERGES_FP32
    assert bf16.pair("model").status == unknown.pair("model").status == "agrees"
    assert bf16.pair("model").k3_threshold == K3_DIVERGES_BF16


def test_without_recorded_log_probs_the_sampling_path_is_unchecked() -> None:
    result = compare_logprobs({"recomputed": _records("recomputed", BASE), "trainer": _records("trainer", BASE)})
    assert result.finding == "not_checked"
    assert result.pair("sampling_path").detail == NOT_PROVIDED == result.pair("end_to_end").detail
    assert result.pair("model").status == "agrees"


def test_tokens_with_different_ids_are_left_out_and_counted() -> None:
    result = compare_logprobs({"recorded": _records("recorded", BASE), "recomputed": _records("recomputed", BASE),
                               "trainer": _records("trainer", BASE, tokens=(7, 3, 12, 2))})
    assert result.token_mismatches == 2 and result.pair("model").tokens == 6


def test_samples_match_by_request_id_when_every_record_has_one() -> None:
    recorded = _records("recorded", BASE, samples=1)
    trainer = [LogprobRecord("trainer", 5, 9, "step5-p0-s0", (4, 5, 6, 7), TOKENS, BASE, None, "t.jsonl:1")]
    result = compare_logprobs({"recorded": recorded, "trainer": trainer})
    assert result.pair("end_to_end").tokens == 4


def _report(verdict: str) -> RootCauseReport:
    return RootCauseReport(verdict, None, None, None, (), (), None, (), ("module check",), (), (), (), {})


def test_the_verdict_names_the_sampling_path_and_the_tokens() -> None:
    comparison = compare_logprobs({"recorded": _records("recorded", _hot(BASE, 1.3)),
                                   "recomputed": _records("recomputed", BASE), "trainer": _records("trainer", BASE)})
    report = with_logprob_finding(_report("no_divergence"), comparison, Step("three-way", "executed", ""),
                                  ["mismatch/mismatch_k3_kl"])
    assert (report.verdict, report.divergence, report.confidence) == ("root_cause_found", "sampling_path", "high")
    assert report.root_cause["bucket"] == "after_model" and "temperature" in report.hypothesis["inference_path"]
    assert "recorded" in report.next_checks[0] and "position" in report.next_checks[0]
    assert report.to_dict()["logprob_comparison"]["finding"] == "sampling_path"


@pytest.mark.parametrize(("module_verdict", "finding", "expected"), [
    ("no_divergence", "sampling_path", "sampling_path"),
    ("root_cause_found", "sampling_path", "sampling_path_and_module"),
    ("root_cause_found", "aligned", "module"),
    ("no_divergence", "model", "module"),
    ("no_divergence", "aligned", "aligned"),
    ("no_divergence", "not_checked", "sampling_path_unchecked"),
    ("cannot_conclude", "not_checked", "undetermined"),
])
def test_classification(module_verdict: str, finding: str, expected: str) -> None:
    recorded = {"sampling_path": _hot(BASE, 1.3), "model": BASE, "aligned": BASE}.get(finding)
    trainer = tuple(v - 0.05 for v in BASE) if finding == "model" else BASE
    records = {"recomputed": _records("recomputed", BASE), "trainer": _records("trainer", trainer)}
    if recorded:
        records["recorded"] = _records("recorded", recorded)
    comparison = compare_logprobs(records) if recorded else not_checked()
    assert comparison.finding == finding
    assert classify_divergence(module_verdict, comparison) == expected


def test_unchecked_sampling_path_under_a_breach_says_so_never_no_divergence() -> None:
    report = with_logprob_finding(_report("no_divergence"), not_checked(), Step("three-way", "not_run", ""),
                                  ["mismatch/mismatch_k3_kl"])
    assert report.verdict == "no_divergence" and report.divergence == "sampling_path_unchecked"
    assert report.next_checks == ("module check", f"{NOT_PROVIDED}; save the log-probs the rollout returned for "
                                  "the window's samples (format: autotest/consistency/logprob_records.py).")


def test_a_trainer_gathering_one_position_off_names_the_trainer_side() -> None:
    """recorded = the rollout's recompute, both != the trainer, every module aligned: the trainer's log-prob path,
    never 'no_divergence' and never the rollout's sampling path first."""
    shifted = BASE[1:] + BASE[:1]  # the trainer reads each token's log-prob one position off
    comparison = compare_logprobs({"recorded": _records("recorded", BASE), "recomputed": _records("recomputed", BASE),
                                   "trainer": _records("trainer", shifted)})
    assert comparison.finding == "model"
    report = with_logprob_finding(_report("no_divergence"), comparison, Step("three-way", "executed", ""),
                                  ["mismatch/mismatch_k3_kl"])
    assert (report.verdict, report.divergence, report.confidence) == ("root_cause_found", "module", "medium")
    assert report.root_cause["module"] == "trainer log-prob computation (after the model)"
    assert "recorded log-probs equal its own model's recompute" in report.root_cause["why"]
    assert report.next_checks[0].startswith("Check the trainer's log-prob computation after the model")
    assert all("rollout's sampling path" not in check for check in report.next_checks)


def _decoded(kind: str, values: tuple[float, ...], position_ids: tuple[int, ...] | None = None):
    """One sample whose response starts at position 4; the sampler's record may carry its KV-cache path."""
    kv = {} if position_ids is None else {"position_ids": position_ids,
                                          "cache_lengths": tuple(range(4, 4 + len(values)))}
    return [LogprobRecord(kind, 5, 0, "step5-p0-s0", tuple(range(4, 4 + len(values))), TOKENS, values, "fp32",
                          f"{kind}.jsonl:1", **kv)]


def test_a_divergence_from_the_first_decode_forward_on_is_the_decode_path() -> None:
    off = (BASE[0], *(v - 0.01 for v in BASE[1:]))  # the prefill-scored token agrees, the decoded ones do not
    result = compare_logprobs({"recorded": _decoded("recorded", off, (3, 5, 6, 7)),
                               "recomputed": _decoded("recomputed", BASE), "trainer": _decoded("trainer", BASE)})
    assert result.finding == "decode_path"
    sampling = result.pair("sampling_path")
    assert [(p.phase, p.status, p.tokens) for p in sampling.phases] == [
        ("prefill", "agrees", 1), ("first_decode", "diverges", 1), ("later_decode", "diverges", 2)]
    assert sampling.decode_only and sampling.onset.first.position == 5 and sampling.onset.first.index == 1
    kv = result.kv_path
    assert (kv.tokens, kv.position_id_off_count, kv.cache_length_off_count) == (4, 3, 0)
    assert "first at position 5 (response token 1, first_decode): position id 5, expected 4" in kv.line()
    report = with_logprob_finding(_report("no_divergence"), result, Step("three-way", "executed", ""),
                                  ["mismatch/mismatch_k3_kl"])
    assert (report.verdict, report.divergence, report.confidence) == ("root_cause_found", "decode_path", "high")
    cause = report.root_cause
    assert (cause["bucket"], cause["onset_phase"], cause["onset_position"]) == ("decode_path", "first_decode", 5)
    assert "KV cache" in cause["module"] and not any("temperature" in c for c in report.next_checks)
    assert any("KV-cache path" in line for line in report.evidence_chain)


def test_a_divergence_from_the_prefill_on_stays_the_sampling_path() -> None:
    result = compare_logprobs({"recorded": _decoded("recorded", _hot(BASE, 1.3), (3, 4, 5, 6)),
                               "recomputed": _decoded("recomputed", BASE), "trainer": _decoded("trainer", BASE)})
    assert result.finding == "sampling_path" and result.pair("sampling_path").onset.phase == "prefill"
    assert result.kv_path.consistent and "every one of 4 recorded token(s)" in result.kv_path.line()


def test_a_later_onset_is_named_at_its_position() -> None:
    off = (*BASE[:2], *(v - 0.01 for v in BASE[2:]))
    sampling = compare_logprobs({"recorded": _decoded("recorded", off),
                                 "recomputed": _decoded("recomputed", BASE)}).pair("sampling_path")
    assert sampling.onset.phase == "later_decode" and sampling.onset.first.position == 6
