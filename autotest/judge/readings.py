"""Readings for hypotheses the per-role rows cannot tell apart (issue 30: evidence before rules), measured on the
traces themselves, each in a module of its own:

- a unit change (:mod:`.units_evidence`: one metric a constant factor or offset from the golden at every step, every
  other one in bounds);
- a changed run shape (:mod:`.shape_evidence`: a clean exit after another number of steps, the steps it did within
  bounds);
- a loss term and the first step (:mod:`.onset_evidence`: one training role moving away from the golden steps before
  the scores; which metrics were off the golden before any update);
- the teachers (:mod:`.teacher_evidence`: a teacher's KL that points at that teacher, or the scores falling with it);
- the training scores against the eval's (:mod:`.data_evidence`: opposite directions are other training data);
- the data composition (:mod:`.data_evidence`: repeated prompts, distinct prompts or a source's count off their
  reference, where the log has them);
- a smoothed log (:mod:`.smoothing_evidence`: every metric calmer than any calibration run, an average undone
  passing).

report.md prints them as the hypothesis evidence table; the triage rules read them by name.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.data_evidence import composition_evidence, train_eval_evidence
from autotest.judge.model import PASS, CheckResult, Measured, decide_status
from autotest.judge.onset_evidence import first_step_evidence, onset_evidence
from autotest.judge.shape_evidence import shape_evidence
from autotest.judge.smoothing_evidence import smoothing_evidence
from autotest.judge.teacher_evidence import teacher_evidence
from autotest.judge.trace import Trace
from autotest.judge.units_evidence import units_evidence


def hypothesis_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                        roles: RoleMap, noise_scale: float = 1.0) -> tuple[Measured, ...]:
    """What was measured for the hypotheses the role rows cannot tell apart, where the results make them a question.

    ``noise_scale``: the current trace's per-step noise as a share of one run's (a mean of K replicates,
    :func:`.per_step_noise.mean_noise_scale`); the readings in noise sds use the noise table scaled by it, the gates
    checked again use the baseline as it is (its pooled thresholds are scaled for the mean already)."""
    if decide_status(results) == PASS:
        return ()
    per_step = baseline
    if noise_scale != 1.0 and baseline.noise_table:
        per_step = replace(baseline, noise_table=MappingProxyType({
            m: MappingProxyType({s: v * noise_scale for s, v in series.items()})
            for m, series in baseline.noise_table.items()}))
    readings = (units_evidence(baseline, golden, current, results, roles),
                shape_evidence(baseline, golden, current, results, roles),
                onset_evidence(per_step, golden, current, results, roles),
                first_step_evidence(per_step, golden, current, results, roles),
                teacher_evidence(per_step, golden, current, results, roles),
                train_eval_evidence(per_step, golden, current, results, roles),
                composition_evidence(golden, current, roles),
                smoothing_evidence(baseline, golden, current, results, roles, noise_scale))
    return tuple(m for m in readings if m is not None)
