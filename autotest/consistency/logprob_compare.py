"""The three-way log-prob comparison: recorded while sampling, recomputed by the rollout model, trainer's.

Module dumps cover the model's forward only. The log-probs a run's mismatch metrics use come from
the rollout's *sampling path* (temperature, top-p/top-k, logits processors, gathering), so each
token of the window is seen three times (records: :mod:`.logprob_records`) and compared in pairs:

- ``sampling_path``: recorded vs recomputed — the same rollout model, once through the sampler,
  once through a plain prefill. A difference here is after the model.
- ``model``: recomputed vs trainer — the two models' forwards (localised by the module dumps).
- ``end_to_end``: recorded vs trainer — what the run's mismatch metrics measured.

Per pair: tokens compared, max/mean |diff| and k3 = mean(exp(d) - d - 1) with d = other - reference
(the trainer-like side minus the rollout-like side, as the mismatch metric defines it), and the
tokens that differ most with all three values. Each pair is also split by what scored the token (``PHASES``):
``prefill`` (a sample's first response token, scored by the prefill forward's last logits), ``first_decode``
(the next token, scored by the first decode forward over the KV cache) and ``later_decode``; a pair whose
prefill tokens agree while its decode tokens diverge points at the decode path (KV cache, decode position ids),
and the first diverging phase is its onset. When the recorded kind carries the KV-cache path (``position_ids``,
``cache_lengths``), every token's entries are checked against its position (:class:`KvPathCheck`).
``compare_logprobs`` is pure logic: records in, a
typed result out; ``load_comparison`` reads the files first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.consistency.logprob_records import (
    KINDS,
    LogprobRecord,
    read_logprob_files,
)
from autotest.errors import UsageError

#: A pair "diverges" when its k3 over the window exceeds the threshold of its lower precision side.
#: Healthy noise, measured on the tiny workload (engine-layout rollout vs HF trainer, ~3,400 tokens):
#: fp32 rollout k3 ≈ 1e-14 (REFERENCE.md too), max |diff| 5e-7; bf16 rollout vs fp32 trainer ≈ 7e-7 at
#: step 1 (REFERENCE.md: ≈ 2e-6 over a run), max |diff| 4e-3; recorded vs recomputed inside a bf16
#: rollout: 0. The faults: the ReLU rollout-impl ≈ 8e-6 to 7e-5 (by batch), a sampling temperature of
#: 1.05 ≈ 1.3e-4 and 1.3 ≈ 3e-3, a never-synced layer ≈ 1e-2. So: fp32 on both sides 1e-9 (1e5 x its
#: noise, 8,000 x below the smallest fault); bf16/fp16 (or unknown) 1e-5, 5 x the bf16 noise — a fault
#: smaller than that is not told apart from bf16 rounding. k3, like the metric that breached, pools the window.
K3_DIVERGES_FP32 = 1e-9
K3_DIVERGES_BF16 = 1e-5
#: tokens listed per diverging pair (the largest |diff| first)
TOKENS_SHOWN = 10
PAIRS = (("sampling_path", "recorded", "recomputed"), ("model", "recomputed", "trainer"),
         ("end_to_end", "recorded", "trainer"))
NOT_PROVIDED = "recorded log-probs not provided: the sampling path cannot be checked"
#: what scored a token: the prefill forward (a sample's first response token), the first decode forward, later ones
PHASES = ("prefill", "first_decode", "later_decode")
PHASE_TEXT = {"prefill": "the first response token (scored by the prefill forward)",
              "first_decode": "the token after the first decoded one (scored by the first decode forward over the "
                              "KV cache)",
              "later_decode": "later decoded tokens (scored by the later decode forwards)"}


def phase_of(index: int) -> str:
    """The phase of a sample's ``index``-th response token (0 = the first)."""
    return PHASES[min(index, 2)]


@dataclass(frozen=True)
class TokenRow:
    """One token of the window with the log-prob each kind gave it (None: that kind lacks it)."""

    step: int
    sample: int
    request_id: str | None
    position: int
    token_id: int
    values: Mapping[str, float | None]
    index: int = 0
    """The token's index in its sample's response (0: the first response token, scored by the prefill)."""

    @property
    def phase(self) -> str:
        return phase_of(self.index)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "sample": self.sample, "request_id": self.request_id,
                "position": self.position, "index": self.index, "phase": self.phase, "token_id": self.token_id,
                **{k: self.values.get(k) for k in KINDS}}


@dataclass(frozen=True)
class PhaseComparison:
    """One pair over the tokens of one phase."""

    phase: str
    status: str
    """``diverges`` | ``agrees`` | ``not_compared`` (no token of that phase)."""
    tokens: int = 0
    k3: float | None = None
    max_abs_diff: float | None = None
    first: TokenRow | None = None
    """The earliest token of the phase (smallest response index, then step and sample) whose |diff| alone
    exceeds the pair's threshold (k3 of a single token above it)."""

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "status": self.status, "tokens": self.tokens, "k3": self.k3,
                "max_abs_diff": self.max_abs_diff, "first": self.first.to_dict() if self.first else None}

    def line(self) -> str:
        if self.status == "not_compared":
            return f"{self.phase}: no token"
        return f"{self.phase}: {self.status}, k3 {self.k3:.3e}, max |diff| {self.max_abs_diff:.3e} over {self.tokens}"


@dataclass(frozen=True)
class KvPathCheck:
    """The recorded kind's KV-cache path against what each token's position implies: the forward that scored the
    token at position p fed the token at p - 1 (position id p - 1) over a cache of p entries (its own included)."""

    tokens: int
    position_id_off: tuple[tuple[TokenRow, int], ...]
    """Tokens whose scoring forward used another position id, with that id (earliest first, at most 10)."""
    position_id_off_count: int
    cache_length_off: tuple[tuple[TokenRow, int], ...]
    """Tokens whose scoring forward attended over another cache length, with that length."""
    cache_length_off_count: int

    @property
    def consistent(self) -> bool:
        return not (self.position_id_off_count or self.cache_length_off_count)

    def line(self) -> str:
        if self.consistent:
            return (f"KV-cache path: every one of {self.tokens} recorded token(s) was scored by a forward at position "
                    "id position - 1 over a cache of position entries")
        parts = []
        for label, off, count, expected in (("position id", self.position_id_off, self.position_id_off_count, -1),
                                            ("cache length", self.cache_length_off, self.cache_length_off_count, 0)):
            if count:
                row, got = off[0]
                parts.append(f"{count} of {self.tokens} token(s) scored by a decode forward with another {label}, "
                             f"first at position {row.position} (response token {row.index}, {row.phase}): {label} "
                             f"{got}, expected {row.position + expected}")
        return "KV-cache path: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "consistent": self.consistent,
                "position_id_off": self.position_id_off_count, "cache_length_off": self.cache_length_off_count,
                "first_position_id_off": [{**r.to_dict(), "position_id": v} for r, v in self.position_id_off],
                "first_cache_length_off": [{**r.to_dict(), "cache_length": v} for r, v in self.cache_length_off],
                "line": self.line()}


@dataclass(frozen=True)
class PairComparison:
    """One pair of kinds over the tokens both hold."""

    name: str
    reference: str
    other: str
    status: str
    """``diverges`` | ``agrees`` | ``not_compared``."""
    tokens: int = 0
    k3_threshold: float = K3_DIVERGES_BF16
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    k3: float | None = None
    worst_tokens: tuple[TokenRow, ...] = ()
    detail: str = ""
    phases: tuple[PhaseComparison, ...] = ()
    """The pair split by what scored the token (``PHASES``)."""

    def phase(self, name: str) -> PhaseComparison | None:
        return next((p for p in self.phases if p.phase == name), None)

    @property
    def onset(self) -> PhaseComparison | None:
        """The first phase (prefill, first decode, later decode) that diverges; None when none does."""
        return next((p for p in self.phases if p.status == "diverges"), None)

    @property
    def decode_only(self) -> bool:
        """The pair diverges, its prefill tokens agree and a decode phase diverges: the decode path."""
        prefill, onset = self.phase("prefill"), self.onset
        return (self.status == "diverges" and prefill is not None and prefill.status == "agrees"
                and onset is not None and onset.phase != "prefill")

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.name, "reference": self.reference, "other": self.other, "status": self.status,
                "tokens": self.tokens, "max_abs_diff": self.max_abs_diff, "mean_abs_diff": self.mean_abs_diff,
                "k3": self.k3, "k3_threshold": self.k3_threshold, "detail": self.detail,
                "worst_tokens": [t.to_dict() for t in self.worst_tokens],
                "phases": [p.to_dict() for p in self.phases]}

    def line(self) -> str:
        if self.status == "not_compared":
            return f"{self.name} ({self.reference} vs {self.other}): not compared: {self.detail}"
        return (f"{self.name} ({self.reference} vs {self.other}): {self.status}: k3 {self.k3:.3e} "
                f"(threshold {self.k3_threshold:.0e}), max |diff| {self.max_abs_diff:.3e}, "
                f"mean |diff| {self.mean_abs_diff:.3e} over {self.tokens} token(s)")


@dataclass(frozen=True)
class LogprobComparison:
    """The three pairs, what was provided and the finding."""

    provided: Mapping[str, int]
    """kind → records (samples) read."""
    pairs: tuple[PairComparison, ...]
    token_mismatches: int
    """Tokens at the same sample and position whose token ids differ between kinds (left out)."""
    sources: Mapping[str, tuple[str, ...]]
    """kind → files read."""
    kv_path: KvPathCheck | None = None
    """The recorded kind's KV-cache path (None: the records carry no ``position_ids``/``cache_lengths``)."""

    def pair(self, name: str) -> PairComparison:
        return next(p for p in self.pairs if p.name == name)

    @property
    def finding(self) -> str:
        """``decode_path`` | ``sampling_path`` | ``model`` | ``sampling_path_and_model`` | ``aligned`` |
        ``sampling_path_agrees`` (the model pair not compared) | ``not_checked`` (no recorded, or no recomputed,
        log-probs). ``decode_path``: recorded and recomputed agree on the prefill-scored tokens and diverge from a
        decode phase on (or the recorded KV-cache path is off), the model pair does not diverge."""
        sampling, model = self.pair("sampling_path").status, self.pair("model").status
        if sampling == "not_compared":
            return "model" if model == "diverges" else "not_checked"
        kv_off = self.kv_path is not None and not self.kv_path.consistent
        if sampling == "diverges" and model != "diverges" and (self.pair("sampling_path").decode_only or kv_off):
            return "decode_path"
        if sampling == "diverges":
            return "sampling_path_and_model" if model == "diverges" else "sampling_path"
        if model == "diverges":
            return "model"
        return "aligned" if model == "agrees" else "sampling_path_agrees"

    def to_dict(self) -> dict[str, Any]:
        return {"finding": self.finding, "provided": dict(self.provided),
                "token_mismatches": self.token_mismatches, "pairs": [p.to_dict() for p in self.pairs],
                "kv_path": self.kv_path.to_dict() if self.kv_path else None,
                "sources": {k: list(v) for k, v in self.sources.items()}}


def not_checked(reason: str = NOT_PROVIDED) -> LogprobComparison:
    """The comparison when no records could be used; every pair says why."""
    return LogprobComparison({}, tuple(PairComparison(n, a, b, "not_compared", detail=reason) for n, a, b in PAIRS),
                             0, {})


def load_comparison(paths: Sequence[Path] | None, strict: bool) -> tuple[LogprobComparison, str, str]:
    """(comparison, step status, step detail) from the record files named. ``strict`` (``consistency
    analyze``): an unreadable file raises its one-line UsageError; otherwise (the job) the step fails
    with that line and the sampling path stays unchecked."""
    if not paths:
        return not_checked(), "not_run", f"{NOT_PROVIDED} (pass --logprobs FILE, format: logprob_records)"
    try:
        records = read_logprob_files(paths)
    except UsageError as exc:
        if strict:
            raise
        return not_checked(f"{NOT_PROVIDED}: {exc}"), "failed", str(exc)
    if not records:
        where = ", ".join(map(str, paths))
        return not_checked(f"{NOT_PROVIDED}: no records in {where}"), "not_run", f"no log-prob records in {where}"
    comparison = compare_logprobs(records)
    return comparison, "executed", "; ".join(p.line() for p in comparison.pairs)


def compare_logprobs(records: Mapping[str, Sequence[LogprobRecord]]) -> LogprobComparison:
    """Compare every pair of kinds present, token by token (matched by sample and position)."""
    by_request = all(r.request_id for rs in records.values() for r in rs)
    table: dict[tuple[Any, int], dict[str, tuple[int, float]]] = {}
    meta: dict[tuple[Any, int], tuple[int, int, str | None]] = {}
    for kind, rs in records.items():
        for r in rs:
            sample_key = (r.step, r.request_id) if by_request else (r.step, r.sample)
            for position, token, value in zip(r.positions, r.token_ids, r.logprobs, strict=True):
                table.setdefault((sample_key, position), {})[kind] = (token, value)
                meta.setdefault((sample_key, position), (r.step, r.sample, r.request_id))
    first_position: dict[Any, int] = {}
    for sample_key, position in table:
        first_position[sample_key] = min(position, first_position.get(sample_key, position))
    mismatched = {key for key, seen in table.items() if len({t for t, _ in seen.values()}) > 1}
    rows = [TokenRow(*meta[key], key[1], next(iter(seen.values()))[0], {k: v for k, (_, v) in seen.items()},
                     key[1] - first_position[key[0]])
            for key, seen in sorted(table.items(), key=lambda kv: (meta[kv[0]][0], meta[kv[0]][1], kv[0][1]))
            if key not in mismatched]
    pairs = tuple(_compare_pair(name, a, b, rows, records) for name, a, b in PAIRS)
    sources = {k: tuple(sorted({r.source.rsplit(":", 1)[0] for r in rs})) for k, rs in records.items()}
    return LogprobComparison({k: len(rs) for k, rs in records.items()}, pairs, len(mismatched), sources,
                             _kv_path(records.get("recorded", ()), first_position, by_request))


def _kv_path(recorded: Sequence[LogprobRecord], first_position: Mapping[Any, int],
             by_request: bool) -> KvPathCheck | None:
    with_kv = [r for r in recorded if r.position_ids is not None and r.cache_lengths is not None]
    if not with_kv:
        return None
    ids_off: list[tuple[TokenRow, int]] = []
    cache_off: list[tuple[TokenRow, int]] = []
    tokens = 0
    for r in with_kv:
        start = first_position.get((r.step, r.request_id) if by_request else (r.step, r.sample), min(r.positions))
        for position, token, value, pid, cache in zip(r.positions, r.token_ids, r.logprobs, r.position_ids,
                                                      r.cache_lengths, strict=True):  # type: ignore[arg-type]
            tokens += 1
            row = TokenRow(r.step, r.sample, r.request_id, position, token, {"recorded": value}, position - start)
            if pid != position - 1:
                ids_off.append((row, pid))
            if cache != position:
                cache_off.append((row, cache))
    def earliest(off: list[tuple[TokenRow, int]]) -> tuple[tuple[TokenRow, int], ...]:
        return tuple(sorted(off, key=lambda o: (o[0].index, o[0].step, o[0].sample))[:TOKENS_SHOWN])

    return KvPathCheck(tokens, earliest(ids_off), len(ids_off), earliest(cache_off), len(cache_off))


def _k3(diffs: Sequence[float]) -> float:
    return math.fsum(math.expm1(d) - d for d in diffs) / len(diffs)


def _compare_pair(name: str, reference: str, other: str, rows: Sequence[TokenRow],
                  records: Mapping[str, Sequence[LogprobRecord]]) -> PairComparison:
    missing = [k for k in (reference, other) if not records.get(k)]
    if missing:
        detail = NOT_PROVIDED if "recorded" in missing else f"{' and '.join(missing)} log-probs not provided"
        return PairComparison(name, reference, other, "not_compared", detail=detail)
    both = [r for r in rows if r.values.get(reference) is not None and r.values.get(other) is not None]
    if not both:
        return PairComparison(name, reference, other, "not_compared",
                              detail=f"no token in common between {reference} and {other} (same step, sample "
                                     "and position, same token id)")
    diffs = [r.values[other] - r.values[reference] for r in both]  # type: ignore[operator]
    k3 = _k3(diffs)
    worst = sorted(range(len(both)), key=lambda i: -abs(diffs[i]))[:TOKENS_SHOWN]
    fp32 = all(r.dtype == "fp32" for k in (reference, other) for r in records[k])
    threshold = K3_DIVERGES_FP32 if fp32 else K3_DIVERGES_BF16
    return PairComparison(
        name, reference, other, "diverges" if k3 > threshold else "agrees", tokens=len(both), k3_threshold=threshold,
        max_abs_diff=max(abs(d) for d in diffs), mean_abs_diff=math.fsum(abs(d) for d in diffs) / len(diffs),
        k3=k3, worst_tokens=tuple(both[i] for i in worst), phases=_phases(both, diffs, threshold))


def _phases(rows: Sequence[TokenRow], diffs: Sequence[float], threshold: float) -> tuple[PhaseComparison, ...]:
    out = []
    for phase in PHASES:
        picked = [(r, d) for r, d in zip(rows, diffs, strict=True) if r.phase == phase]
        if not picked:
            out.append(PhaseComparison(phase, "not_compared"))
            continue
        k3 = _k3([d for _, d in picked])
        over = [r for r, d in picked if math.expm1(d) - d > threshold]
        first = min(over, key=lambda r: (r.index, r.step, r.sample)) if over else None
        out.append(PhaseComparison(phase, "diverges" if k3 > threshold else "agrees", len(picked), k3,
                                   max(abs(d) for _, d in picked), first))
    return tuple(out)
