"""The log-prob half of the root-cause judgement: where the three log-prob series (the rollout's recorded ones, its
own model's recompute, the trainer's) place a divergence, and the report it completes
(:func:`with_logprob_finding`). A divergence after the model — in the rollout's sampling path or the trainer's
log-prob computation — is a root cause no module dump can show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from autotest.consistency.logprob_compare import NOT_PROVIDED, PHASE_TEXT, LogprobComparison
from autotest.consistency.verdict import AFTER_MODEL_CHECKS, RootCauseReport, Step


#: root-cause bucket of a divergence in the rollout's sampling path (after the model)
AFTER_MODEL = "after_model"
#: root-cause bucket of a divergence that starts after the prefill: the rollout's decode forwards over its KV cache
DECODE_PATH = "decode_path"


def classify_divergence(module_verdict: str, logprobs: LogprobComparison) -> str:
    """Where the sides diverge: the module judgement and the three-way log-prob comparison together."""
    finding = logprobs.finding
    if finding == "decode_path":
        return "decode_path"
    sampling = finding in ("sampling_path", "sampling_path_and_model")
    module = module_verdict == "root_cause_found" or finding in ("model", "sampling_path_and_model")
    if sampling:
        return "sampling_path_and_module" if module else "sampling_path"
    if module:
        return "module"
    if module_verdict == "no_divergence":
        return "aligned" if finding == "aligned" else "sampling_path_unchecked"
    return "undetermined"


def sampling_path_cause(logprobs: LogprobComparison) -> dict[str, Any]:
    """The root cause when the recorded log-probs differ from the rollout model's own recompute."""
    pair = logprobs.pair("sampling_path")
    return {
        "module": "rollout sampling path (after the model)", "bucket": AFTER_MODEL,
        "localisation": "between the rollout model's logits and the log-probs it returned",
        "train_keys": [], "rollout_keys": [], "train_modules": [], "rollout_modules": [], "divergent_parts": [],
        "evidence": "log-probs", "pair": "recorded vs recomputed",
        "why": (f"the log-probs the rollout recorded while sampling differ from the same rollout model's prefill "
                f"recompute of the same tokens ({pair.line()}): the model's forward is the same on both, so the "
                "difference is made after it, where the logits become sampled tokens and reported log-probs"),
    }


def decode_path_cause(logprobs: LogprobComparison) -> dict[str, Any]:
    """The root cause when the recorded log-probs equal the rollout's own prefill recompute on the prefill-scored
    tokens and differ from it from a decode forward on: the KV-cache path (decode position ids, cache offsets)."""
    pair = logprobs.pair("sampling_path")
    onset, kv = pair.onset, logprobs.kv_path
    first = onset.first if onset else None
    where = (f"from {PHASE_TEXT[onset.phase]}" if onset else "in the decode forwards") + (
        f", first at position {first.position} (response token {first.index}) of sample {first.sample}"
        if first else "")
    phases = "; ".join(p.line() for p in pair.phases)
    why = (f"the log-probs the rollout recorded while sampling equal its own model's prefill recompute on the token "
           f"the prefill scored and differ {where} ({phases}); the dumped prefill forwards agree, so the difference "
           "is made in the decode forwards over the KV cache")
    if kv is not None:
        why += f"; {kv.line()}"
    return {
        "module": "rollout decode path (KV cache / decode position ids)", "bucket": DECODE_PATH,
        "localisation": where.removeprefix("from ").removeprefix("in "),
        "onset_phase": onset.phase if onset else None, "onset_position": first.position if first else None,
        "onset_index": first.index if first else None,
        "kv_path": {k: v for k, v in kv.to_dict().items() if not k.startswith("first_")} if kv else None,
        "train_keys": [], "rollout_keys": [], "train_modules": [], "rollout_modules": [], "divergent_parts": [],
        "evidence": "log-probs", "pair": "recorded vs recomputed", "why": why,
    }


DECODE_PATH_HYPOTHESIS = {
    "expected_train_path": "Each decode forward feeds the last sampled token at position id p - 1 over a KV cache "
                           "of exactly the p - 1 earlier tokens, so its logits equal the full-sequence (prefill) "
                           "forward's at that position.",
    "inference_path": "The rollout's decode forwards see another position id or another cache (positions counted "
                      "from the wrong offset after the first decoded token, a cache entry dropped, doubled or "
                      "written at the wrong slot), while the prefill forward is right.",
}


def decode_path_checks(logprobs: LogprobComparison) -> list[str]:
    """Next checks for a decode-path divergence, pointing at where it starts."""
    pair = logprobs.pair("sampling_path")
    onset = pair.onset
    first = onset.first if onset else None
    at = (f" (the first differs at position {first.position}, response token {first.index}, step {first.step} "
          f"sample {first.sample}: recorded {first.values.get('recorded'):.6g}, recomputed "
          f"{first.values.get('recomputed'):.6g})") if first else ""
    checks = [f"Check the rollout's decode forwards{at}: the position ids each decode step gives its token (expected "
              "its index in prompt + response) and the KV-cache length and slot it reads and writes (expected every "
              "earlier token once).",
              "Re-run one sample's decode with the position ids and cache length printed per step, next to a "
              "full-sequence forward of the same tokens: the first step whose logits differ is the bug."]
    if logprobs.kv_path is None:
        checks.append("Record the KV-cache path with the log-probs (position_ids and cache_lengths per token, "
                      "format: autotest/consistency/logprob_records.py) to see the offset directly.")
    return checks


SAMPLING_PATH_HYPOTHESIS = {
    "expected_train_path": "The trainer scores each sampled token with the model's own distribution "
                           "(log_softmax of the logits at temperature 1, no processors).",
    "inference_path": "The rollout reports log-probs from a changed distribution: a sampling temperature other "
                      "than the trainer's, top-p/top-k or logits processors applied before the log-probs are "
                      "taken, or log-probs gathered for the wrong tokens/positions.",
}


def trainer_path_cause(logprobs: LogprobComparison) -> dict[str, Any]:
    """The root cause when the rollout's two paths agree and the trainer's log-probs differ from both."""
    model, sampling = logprobs.pair("model"), logprobs.pair("sampling_path")
    return {
        "module": "trainer log-prob computation (after the model)", "bucket": AFTER_MODEL,
        "localisation": "between the trainer model's logits and the log-probs it computes for the sampled tokens",
        "train_keys": [], "rollout_keys": [], "train_modules": [], "rollout_modules": [], "divergent_parts": [],
        "evidence": "log-probs", "pair": "recomputed vs trainer",
        "why": (f"the rollout's recorded log-probs equal its own model's recompute ({sampling.line()}) but the "
                f"trainer's differ from both ({model.line()}), while every dumped module of the forward agrees: "
                "the difference is made on the trainer side after the model, where logits become the log-probs "
                "of the sampled tokens (shift by one position, gather index, log_softmax, temperature, masking)"),
    }


TRAINER_PATH_HYPOTHESIS = {
    "expected_train_path": "The trainer scores token t with the logits of position t-1 (labels shifted by one), "
                           "log_softmax at the rollout's temperature, gathered at the sampled token ids.",
    "inference_path": "The rollout's recorded log-probs match its own recompute, so the rollout side is "
                      "consistent; the trainer's gather, shift, temperature or mask differs.",
}


def trainer_path_checks(logprobs: LogprobComparison) -> list[str]:
    """Next checks for a trainer-side log-prob divergence, pointing at the tokens that show it."""
    tokens = logprobs.pair("model").worst_tokens[:3]
    shown = "; ".join(f"sample {t.sample} position {t.position} token {t.token_id}: recomputed "
                      f"{t.values.get('recomputed'):.6g}, trainer {t.values.get('trainer'):.6g}" for t in tokens)
    return [f"Check the trainer's log-prob computation after the model on these tokens ({shown}): the position "
            "shift between logits and labels, the gather index, log_softmax and its temperature, the response mask.",
            "Recompute those tokens' log-probs from the trainer model's logits by hand (log_softmax at position t-1, "
            "gathered at token t) and compare with both sides: the one that differs is the bug."]


def sampling_path_checks(logprobs: LogprobComparison) -> list[str]:
    """Next checks for a sampling-path divergence, pointing at the tokens that show it."""
    tokens = logprobs.pair("sampling_path").worst_tokens[:3]
    shown = "; ".join(f"sample {t.sample} position {t.position} token {t.token_id}: recorded "
                      f"{t.values.get('recorded'):.6g}, recomputed {t.values.get('recomputed'):.6g}" for t in tokens)
    return [f"Diff the rollout's sampling path against the trainer's log-prob computation on these tokens ({shown}).",
            *AFTER_MODEL_CHECKS[:1]]


def with_logprob_finding(report: RootCauseReport, logprobs: LogprobComparison, step: Step,
                         breached: Sequence[str] = ()) -> RootCauseReport:
    """The module judgement completed by the three-way log-prob comparison (``step`` says how it ran)."""
    divergence = classify_divergence(report.verdict, logprobs)
    compared = [p for p in logprobs.pairs if p.status != "not_compared"]
    changes: dict[str, Any] = {
        "divergence": divergence, "logprobs": logprobs.to_dict(), "steps": (*report.steps, step),
        "evidence_chain": (*report.evidence_chain, *(f"log-probs, {p.line()}" for p in compared)),
        "limitations": (*report.limitations, *(p.line() for p in logprobs.pairs if p.status == "not_compared")),
    }
    if logprobs.token_mismatches:
        changes["limitations"] += ((f"{logprobs.token_mismatches} token(s) carry different token ids between the "
                                    "log-prob records at the same sample and position: left out of the comparison"),)
    if logprobs.kv_path is not None:
        changes["evidence_chain"] += (logprobs.kv_path.line(),)
    if divergence == "decode_path":
        clean = report.verdict == "no_divergence" and not logprobs.token_mismatches
        changes.update(verdict="root_cause_found", confidence="high" if clean else "medium",
                       root_cause=decode_path_cause(logprobs), hypothesis=DECODE_PATH_HYPOTHESIS,
                       next_checks=tuple(decode_path_checks(logprobs)))
    elif divergence == "sampling_path":
        clean = report.verdict == "no_divergence" and not logprobs.token_mismatches
        changes.update(verdict="root_cause_found", confidence="high" if clean else "medium",
                       root_cause=sampling_path_cause(logprobs), hypothesis=SAMPLING_PATH_HYPOTHESIS,
                       next_checks=tuple(sampling_path_checks(logprobs)))
    elif divergence == "sampling_path_and_module":
        changes["next_checks"] = (*report.next_checks, *sampling_path_checks(logprobs))
    elif divergence == "module" and report.verdict == "no_divergence" and \
            logprobs.pair("sampling_path").status == "agrees":
        # recorded = the rollout's own recompute, and both differ from the trainer while every dumped module
        # agrees: the odd one out is the trainer's log-prob computation after its model
        changes.update(verdict="root_cause_found", confidence="medium", root_cause=trainer_path_cause(logprobs),
                       hypothesis=TRAINER_PATH_HYPOTHESIS, next_checks=tuple(trainer_path_checks(logprobs)))
    elif divergence == "module" and report.verdict != "root_cause_found":
        changes["next_checks"] = (
            (f"The rollout model's recompute and the trainer's log-probs differ ({logprobs.pair('model').line()}) "
             "although no dumped module diverges credibly: compare what is not dumped (final norm, lm_head, "
             "log_softmax, gathering) and rerun the window with the tensor pass."), *report.next_checks)
    elif report.verdict == "no_divergence" and breached:
        if divergence == "aligned":
            changes["next_checks"] = (
                (f"Recorded, recomputed and trainer log-probs agree in this window and every module is aligned, yet "
                 f"{', '.join(breached)} breached in the run: the window does not reproduce the breach; dump the "
                 "step the metric breached at (and check that the re-run samples what the run sampled)."),)
        else:
            # the inference first (what the aligned dumps imply), then what would turn it into an observation
            changes["next_checks"] = (*report.next_checks[:1],
                                      (f"{NOT_PROVIDED}; save the log-probs the rollout returned for the window's "
                                       "samples (format: autotest/consistency/logprob_records.py)."),
                                      *report.next_checks[1:])
    return replace(report, **changes)
