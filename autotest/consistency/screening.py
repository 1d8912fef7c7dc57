"""Step 0 of the consistency job: screen a previous run before collecting anything.

From the run's saved config, confirm that log-probs were recomputed on the training side
(xtuner / the embedded workload: ``recompute_logprobs: true``; verl:
``calculate_log_probs: true``): without that recompute the mismatch metrics do not compare
training with inference, so the screening is inconclusive. xtuner has no such key: it always
recomputes (``TrainingWorker.fit`` calls ``compute_actor_logprobs`` every step) and logs the comparison
as ``mismatch/mismatch_*`` every step, so with no key those metrics are the evidence. Then list the consistency metrics
per step (``mismatch/mismatch_*``, ``rollout_corr/*``, ``train/train_rollout_logprob_abs_diff``,
``training/rollout_probs_diff_*``) and pick the diagnostic window: the first breached step.

Breaches come from the harness's own checks when given (their thresholds are calibrated);
otherwise from :data:`DEFAULT_THRESHOLDS`, screening defaults taken from measured magnitudes
(tiny fp32 model: fp32 rollout k3 ≈ 1e-14, bf16 ≈ 2e-6, one unsynced layer ≈ 1e-2), not gates.
Missing metrics, a missing recompute or a missing config give ``inconclusive``, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.schema import load_document
from autotest.readers.reading import read_trace

PREFIXES = (
    "mismatch/mismatch_",
    "rollout_corr/",
    "train/train_rollout_logprob_abs_diff",
    "training/rollout_probs_diff_",
)
RECOMPUTE_KEYS = ("recompute_logprobs", "calculate_log_probs")
#: metrics only a training-side recompute can produce (xtuner's always-on old-log-prob vs rollout comparison)
ALWAYS_ON_PREFIX = "mismatch/mismatch_"
DEFAULT_THRESHOLDS: dict[str, float] = {"mismatch/mismatch_k3_kl": 1e-4, "rollout_corr/k3_kl": 1e-4}
CONFIG_NAMES = ("config.json", "config.yaml", "config.yml", "run_config.json", "run_config.yaml")


@dataclass(frozen=True)
class ScreeningResult:
    """What a previous run says about train–inference consistency."""

    status: str
    """breach | no_breach | inconclusive."""
    recompute: str
    """confirmed | bypassed | unknown."""
    recompute_evidence: str
    """``file: key = value`` or why it is unknown."""
    metrics: tuple[str, ...]
    per_step: Mapping[int, Mapping[str, float]]
    first_breach_step: int | None
    """The diagnostic window: the first step where a consistency metric breached."""
    breaches: tuple[Mapping[str, Any], ...]
    reasons: tuple[str, ...] = field(default=())
    """Why the screening is inconclusive (empty otherwise)."""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "recompute": self.recompute,
            "recompute_evidence": self.recompute_evidence,
            "metrics": list(self.metrics),
            "per_step": {str(s): dict(v) for s, v in self.per_step.items()},
            "first_breach_step": self.first_breach_step,
            "window_step": self.first_breach_step,
            "breaches": [dict(b) for b in self.breaches],
            "reasons": list(self.reasons),
            "source": self.source,
        }


def load_run_config(path: Path) -> tuple[dict[str, Any], Path]:
    """The saved run config (JSON/YAML file, or a folder holding one of :data:`CONFIG_NAMES`)."""
    path = Path(path)
    if path.is_dir():
        found = [path / n for n in CONFIG_NAMES if (path / n).is_file()]
        if not found:
            raise UsageError(f"{path}: no saved run config ({', '.join(CONFIG_NAMES)}) in this folder")
        path = found[0]
    doc = load_document(path, "saved run config")
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a run config must be a mapping")
    return doc, path


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.update(_flatten(value, f"{prefix}{key}."))
    else:
        out[prefix[:-1]] = doc
    return out


def check_recompute(config: Mapping[str, Any], source: str) -> tuple[str, str]:
    """(confirmed | bypassed | unknown, evidence) from the saved config."""
    found = {k: v for k, v in _flatten(config).items() if k.rsplit(".", 1)[-1] in RECOMPUTE_KEYS}
    if not found:
        return "unknown", f"{source}: none of {', '.join(RECOMPUTE_KEYS)} is set"
    values = {
        k: (v if isinstance(v, bool) else str(v).strip().lower() in ("true", "1", "yes")) for k, v in found.items()
    }
    evidence = "; ".join(f"{source}: {k} = {found[k]}" for k in sorted(found))
    return ("confirmed" if all(values.values()) else "bypassed"), evidence


def consistency_series(series: Mapping[str, Mapping[int, float]]) -> dict[str, Mapping[int, float]]:
    return {m: s for m, s in sorted(series.items()) if m.startswith(PREFIXES)}


def screen(
    series: Mapping[str, Mapping[int, float]],
    run_config: Mapping[str, Any] | None,
    config_source: str,
    breaches: Sequence[Mapping[str, Any]] = (),
    thresholds: Mapping[str, float] | None = None,
) -> ScreeningResult:
    """Screen metric series (metric → {step: value}) against the run's config.

    ``breaches`` are the harness's failed consistency checks (``metric``, ``first_breach_step``);
    without them each metric in ``thresholds`` (default :data:`DEFAULT_THRESHOLDS`) breaches at
    the first step whose value exceeds its threshold or is not finite.
    """
    reasons: list[str] = []
    if run_config is None:
        recompute, evidence = "unknown", config_source
    else:
        recompute, evidence = check_recompute(run_config, config_source)
    if recompute == "bypassed":
        reasons.append(
            "log-probs were not recomputed on the training side: "
            "the mismatch metrics do not compare training with inference"
        )
    elif recompute == "unknown":
        reasons.append(f"cannot confirm a training-side log-prob recompute ({evidence})")

    metrics = consistency_series(series)
    always_on = sorted(m for m in metrics if m.startswith(ALWAYS_ON_PREFIX))
    if recompute == "unknown" and always_on:
        recompute = "confirmed"
        evidence = (f"{evidence}; the run logged {', '.join(always_on)}, which compare the training side's "
                    "recomputed log-probs with the rollout's every step (xtuner always recomputes)")
        reasons = [r for r in reasons if not r.startswith("cannot confirm a training-side log-prob recompute")]
    per_step: dict[int, dict[str, float]] = {}
    for name, values in metrics.items():
        for step, value in values.items():
            per_step.setdefault(step, {})[name] = value
    if not metrics:
        reasons.append("no consistency metric in the run (" + ", ".join(p + "*" for p in PREFIXES) + ")")

    found: list[dict[str, Any]] = []
    if breaches:
        found = [dict(b) for b in breaches if b.get("first_breach_step") is not None]
    else:
        limits = DEFAULT_THRESHOLDS if thresholds is None else thresholds
        for name, limit in limits.items():
            for step, value in sorted(metrics.get(name, {}).items()):
                if not math.isfinite(value) or value > limit:
                    found.append(
                        {
                            "metric": name,
                            "first_breach_step": step,
                            "value": value,
                            "threshold": limit,
                            "threshold_source": "screening default" if thresholds is None else "given",
                        }
                    )
                    break
        if metrics and not any(n in metrics for n in limits):
            reasons.append(f"none of the thresholded metrics ({', '.join(limits)}) was logged")
    first = min((int(b["first_breach_step"]) for b in found), default=None)
    status = "inconclusive" if reasons else ("breach" if first is not None else "no_breach")
    return ScreeningResult(
        status=status,
        recompute=recompute,
        recompute_evidence=evidence,
        metrics=tuple(metrics),
        per_step={s: per_step[s] for s in sorted(per_step)},
        first_breach_step=first,
        breaches=tuple(found),
        reasons=tuple(reasons),
        source=config_source,
    )


def screen_run(
    tracker: Path,
    run_config: Path | None,
    breaches: Sequence[Mapping[str, Any]] = (),
    thresholds: Mapping[str, float] | None = None,
) -> ScreeningResult:
    """Read a run's metric log (``autotest.readers.reading.read_trace``) and saved config, then :func:`screen`."""

    trace = read_trace(tracker)
    config: dict[str, Any] | None = None
    source = "no run config given"
    if run_config is not None and not Path(run_config).exists():
        source = f"{run_config}: not found"  # missing: inconclusive; malformed: a usage error below
    elif run_config is not None:
        config, path = load_run_config(Path(run_config))
        source = str(path)
    return screen(trace.series, config, source, breaches, thresholds)
