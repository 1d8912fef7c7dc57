"""The run-shape reading: the step count differs from the case's; did the run end of its own accord after another
number of steps, the steps it did the golden's (a changed schedule or config, not a crash)?"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.evidence import moved_gates, recheck
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, Measured
from autotest.judge.trace import Trace

SHAPE = "run shape"


def _within(trace: Trace, steps: set[int], last: int) -> Trace:
    """``trace`` restricted to ``steps`` up to ``last``."""
    series = {m: MappingProxyType({s: v for s, v in values.items() if s in steps and s <= last})
              for m, values in trace.series.items()}
    return replace(trace, series=MappingProxyType(series),
                   train_steps=tuple(s for s in trace.train_steps if s in steps and s <= last),
                   eval_steps=tuple(s for s in trace.eval_steps if s in steps and s <= last))


def shape_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                   roles: RoleMap) -> Measured | None:
    """The step count differs from the case's: did the run end of its own accord, with the steps it did the golden's?

    Read from the exit status the pipeline recorded (``run[completion]``), the tracker (no cut line, no infrastructure
    failure) and the gates checked again over the steps both runs have."""
    count = next((r for r in results if r.check_id == "steps[count]" and r.status in (FAIL, ERROR)), None)
    if count is None:
        return None
    expected, steps = count.parameters.get("expected"), len(current.train_steps)
    measured = "the exit status, the log's end and the steps both runs did, checked again against the golden"
    values = {"steps": str(steps), "expected": str(expected), "last": str(current.last_train_step)}
    completion = next((r for r in results if r.check_id == "run[completion]"), None)
    if completion is None:
        return Measured(SHAPE, measured, False, "no exit status recorded (an existing log was compared)", values)
    if not completion.parameters.get("clean_exit"):
        return Measured(SHAPE, measured, False, f"the run did not end cleanly: {completion.message}", values)
    cut = [w for w in current.warnings if "truncated" in w]
    broken = [r.check_id for r in results if r.check_id in ("run[tracker]", "run[infra]") and r.status == ERROR]
    if cut or broken:
        return Measured(SHAPE, measured, False, f"exit 0, but the log says otherwise: {(cut or broken)[0]}", values)
    logged = set(current.train_steps) | set(current.eval_steps)
    last = min(current.last_train_step or 0, golden.last_train_step or 0)
    both = logged & (set(golden.train_steps) | set(golden.eval_steps))
    gates = moved_gates(results, roles)
    undecided = {r.check_id for r in gates if r.status == ERROR}
    rechecked = recheck(baseline, _within(golden, both, last), _within(current, both, last),
                         {r.check_id for r in gates})
    # a gate that could not decide on the run and cannot on the common steps either covers none of them (a window
    # past the shorter run's end): it says nothing about the steps both runs did
    unreached = [r.check_id for r in rechecked if r.status == ERROR and r.check_id in undecided]
    decided = [r for r in rechecked if r.check_id not in unreached]
    moved = [r.check_id for r in decided if r.status != PASS]
    prefix = f"steps 1-{last} (the steps both runs did)"
    if not decided or moved:
        return Measured(SHAPE, measured, False, f"exit 0 after {steps} steps, but over {prefix} "
                        f"{', '.join(moved) or 'no gate'} did not pass: the steps it did differ too", values)
    beyond = f" ({len(unreached)} more cover none of them)" if unreached else ""
    return Measured(SHAPE, measured, True, f"exit 0 after {steps} training steps (the case expects {expected}), the "
                    f"log ends on a whole row, and over {prefix} all {len(decided)} gate checks that cover them "
                    f"pass{beyond}", values)
