"""The run pipeline: one function runs a case, :func:`run_case`, for every caller.

``rl-autotest run``, the pytest suites, calibration (N times), bisect probes and A/B sides all call it, so GPU
slicing, retries, the results root and the step summary behave the same everywhere. It sends a case with one
seed through the single run (:mod:`.single`: platform → preflight → card → launch → artifacts → verdict →
published results) and a case with ``replicates: K`` (``--replicates K``, ``--adaptive K``) through the
replicates (:mod:`.replicated`: K single runs, one verdict on their mean). What a run is asked is
:class:`~.options.RunOptions` (launch, judge and publish options, :mod:`.options`); what it answers is
:class:`~.outcome.CaseRun` (:mod:`.outcome`, with the endings both paths publish alike).
"""

from __future__ import annotations

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.replicate_limits import replicates_problem
from autotest.pipeline.options import JudgeOptions, LaunchOptions, PublishOptions, RunOptions
from autotest.pipeline.outcome import DRY_RUN, SKIP, CaseRun
from autotest.pipeline.replicated import run_replicates
from autotest.pipeline.single import run_single

__all__ = ["DRY_RUN", "SKIP", "CaseRun", "JudgeOptions", "LaunchOptions", "PublishOptions", "RunOptions",
           "run_case"]


def run_case(case: Case, options: RunOptions) -> CaseRun:
    """One attempt of ``case`` (relaunched only on a known infrastructure failure), judged and published;
    with replicates, one such attempt per seed and a verdict on their mean."""
    judge = options.judge
    # a tier is judged on one seed: the case's replicates are the full run's
    count = judge.adaptive_max or judge.replicates or (1 if options.launch.tier else case.replicates)
    flag = "--adaptive-replicates" if judge.adaptive_max is not None else "--replicates" if judge.replicates else None
    problem = replicates_problem(count, gpus=case.platform.gpus, takes_seed=case.takes_seed,
                                 force=judge.force_replicates, in_case=flag is None)
    if problem:  # refused before any folder, card or run
        raise UsageError(f"{flag or f'{case.source}: replicates'}: {problem[0]}; {problem[1]}")
    if options.launch.tier and (count > 1 or judge.adaptive_max is not None):
        # the mean's verdict would be judged on the full baseline: refused before anything runs
        raise UsageError(f"--tier {options.launch.tier}: judged on one seed only for now; run it with --replicates 1")
    if judge.adaptive_max is not None:
        return run_replicates(case, options.changed(judge={"adaptive_max": None}), count, adaptive=True)
    if count > 1:
        return run_replicates(case, options, count)
    return run_single(case, options)
