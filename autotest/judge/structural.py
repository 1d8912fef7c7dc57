"""Structural results: what the run did (preflight, completion, tracker, infrastructure) and its shape.

The pipeline hands the judge one :class:`RunFacts` per attempt; every structural result is made
here, so the verdict is decided once, from one list. Checks of a metric's values live in
:mod:`autotest.judge.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from autotest.inputs.baseline import Baseline
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult
from autotest.judge.seed_use import LoggedSeed, seed_result
from autotest.judge.trace import Trace


@dataclass(frozen=True)
class FailFastStop:
    """The run was stopped on purpose after a decided FAIL (``--fail-fast``)."""

    stop_step: int | None  # the last step logged when the stop was decided
    first_breach_step: int | None
    reason: str
    #: the steps the full run would have trained (the case's expected.steps), None: not known
    expected_steps: int | None = None

    @property
    def fraction(self) -> float | None:
        """The share of the run's steps trained when the FAIL was decided."""
        if self.stop_step is None or not self.expected_steps:
            return None
        return min(1.0, self.stop_step / self.expected_steps)

    def where(self) -> str:
        """``step 9 of 45 (20% of the run's steps)``: where the verdict was decided, in every place that says it."""
        if self.fraction is None:
            return f"step {self.stop_step}"
        return f"step {self.stop_step} of {self.expected_steps} ({self.fraction:.0%} of the run's steps)"

    def to_dict(self) -> dict:
        """results.json's ``context.decided``."""
        return {"step": self.stop_step, "of": self.expected_steps, "fraction": None if self.fraction is None
                else round(self.fraction, 4), "first_breach_step": self.first_breach_step, "reason": self.reason}


@dataclass(frozen=True)
class LogFinding:
    """A recognised infrastructure failure in the run's log (OOM, NCCL timeout, port in use ...)."""

    kind: str
    signature: str
    log_path: str
    line_number: int
    line: str


@dataclass(frozen=True)
class RunFacts:
    """Everything the judge needs to know about how one attempt went, gathered by the pipeline."""

    expected_steps: int
    exact_steps: bool
    preflight_problems: tuple[str, ...] = ()
    launched: bool = True
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    timeout_s: float = 0.0
    wall_s: float | None = None
    stopped_reason: str | None = None
    interrupted: str | None = None
    fail_fast: FailFastStop | None = None
    tracker_problem: str | None = None
    infra: LogFinding | None = None
    #: the harness itself failed (the launch could not start, an exception in its own code)
    harness_error: str | None = None
    #: the seed the run was given (None: its launch takes none) and the one its saved config names
    requested_seed: int | None = None
    logged_seed: LoggedSeed | None = None


class Ending(Protocol):
    """How a process ended: a LaunchResult or RunFacts both answer these."""

    timed_out: bool
    timeout_s: float
    stopped_reason: str | None
    interrupted: str | None
    signal: str | None
    exit_code: int | None


@dataclass(frozen=True)
class Completion:
    """Did the run finish its expected shape? status PASS, or ERROR with the reasons."""

    status: str
    observed_steps: int | None
    expected_steps: int
    exact: bool
    reasons: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return self.status == PASS


def completion_status(ending: Ending, observed_steps: int | None, expected_steps: int, exact: bool) -> Completion:
    """Judge completion from the exit and the highest step the tracker reached.

    An exit code alone proves nothing (a trainer behind ``tee`` exits 0 after a crash), and
    steps alone miss a crash after the last step; both are required.
    """
    at = (f"at step {observed_steps} of {expected_steps}" if observed_steps is not None
          else f"before any step was logged (expected {expected_steps})")
    reasons = []
    if ending.timed_out:
        reasons.append(f"run timed out after {ending.timeout_s:g} s {at}")
    elif ending.stopped_reason:
        reasons.append(f"run stopped by the harness {at}: {ending.stopped_reason}")
    elif ending.interrupted:
        reasons.append(f"run interrupted ({ending.interrupted}) {at}")
    elif ending.signal:
        reasons.append(f"run was killed by {ending.signal} {at}")
    elif ending.exit_code != 0:
        reasons.append(f"run exited with code {ending.exit_code} {at}")
    elif observed_steps is None:
        reasons.append(f"run exited 0 but logged no training step (expected {expected_steps}); "
                       "is the tracker written where the case says?")
    elif observed_steps < expected_steps:
        reasons.append(f"run ended {at} with exit code 0 (a pipeline may hide a crash)")
    if exact and observed_steps is not None and observed_steps > expected_steps:
        reasons.append(f"run reached step {observed_steps} but the case expects exactly "
                       f"{expected_steps} (did epochs, batch size or dataset size change?)")
    return Completion(status=ERROR if reasons else PASS, observed_steps=observed_steps,
                      expected_steps=expected_steps, exact=exact, reasons=tuple(reasons))


def _structural(check_id: str, status: str, message: str, **parameters) -> CheckResult:
    return CheckResult(check_id, status, message, kind="structural", parameters=parameters)


def not_reached_message(stop: FailFastStop) -> str:
    after = f", after the first breach at step {stop.first_breach_step}" if stop.first_breach_step is not None else ""
    return f"not reached: stopped by fail-fast at {stop.where()}{after}"


def run_results(facts: RunFacts, current: Trace | None) -> list[CheckResult]:
    """Preflight problems, or the run's completion, its tracker and any infrastructure failure."""
    if facts.preflight_problems:
        return [_structural("preflight", ERROR, problem) for problem in facts.preflight_problems]
    if facts.harness_error:
        return [_structural("run[harness]", ERROR, facts.harness_error)]
    if not facts.launched:
        return []
    observed = current.last_train_step if current is not None else None
    params = {"exit_code": facts.exit_code, "timed_out": facts.timed_out,
              "wall_s": None if facts.wall_s is None else round(facts.wall_s, 2),
              # exit 0 of its own accord: no timeout, signal, harness stop or interrupt (triage's run-shape reading)
              "clean_exit": facts.exit_code == 0 and not (facts.timed_out or facts.signal or facts.stopped_reason
                                                          or facts.interrupted or facts.fail_fast)}
    if facts.fail_fast is not None:
        stop = facts.fail_fast
        results = [_structural("run[completion]", INFO,
                               f"run stopped by fail-fast at {stop.where()}: {stop.reason}", **params)]
    else:
        completion = completion_status(facts, observed, facts.expected_steps, facts.exact_steps)
        results = [_structural("run[completion]", completion.status,
                               "; ".join(completion.reasons) or f"run exited 0 after step {observed}", **params)]
    if facts.tracker_problem:
        results.append(_structural("run[tracker]", ERROR, facts.tracker_problem))
    if facts.requested_seed is not None:
        seed = seed_result(facts.requested_seed, facts.logged_seed)
        if seed is not None:
            results.append(seed)
    if facts.infra is not None:
        found = facts.infra
        results.append(_structural("run[infra]", ERROR, f"{found.kind} ({found.signature}) at {found.log_path}:"
                                   f"{found.line_number}: {found.line}", kind=found.kind))
    return results


def shape_results(baseline: Baseline, current: Trace, wall_time_s: float | None) -> list[CheckResult]:
    """Step count, wall time and the uncalibrated tail, reported as results rather than crashes."""
    results: list[CheckResult] = []
    steps = current.train_steps
    last = steps[-1] if steps else None
    policy = baseline.steps
    if policy.expected is not None:
        count = len(steps)
        params = {"expected": policy.expected, "exact": policy.exact}
        if policy.exact and count == policy.expected or not policy.exact and count >= policy.expected:
            status, message = PASS, f"{count} training steps ({'exactly' if policy.exact else 'at least'} " \
                                    f"{policy.expected} required)"
        elif count < policy.expected:
            status, message = ERROR, (f"run is incomplete: {count} training steps (last step {last}), "
                                      f"expected {policy.expected}; see the run's logs")
        else:
            status, message = FAIL, (f"{count} training steps but the baseline requires exactly "
                                     f"{policy.expected}; the run's shape changed (epochs, batch size, data)")
        results.append(CheckResult("steps[count]", status, message, kind="structural", parameters=params,
                                   observed=float(count)))
    elif baseline.calibrated_range is not None:
        needed = baseline.calibrated_range[1]
        reached = max(list(steps) + list(current.eval_steps), default=None)
        ok = reached is not None and reached >= needed
        message = (f"run reached step {reached}, covering the calibrated range up to {needed}" if ok
                   else f"run is incomplete: reached step {reached}, the calibrated range needs step {needed}")
        results.append(CheckResult("steps[range]", PASS if ok else ERROR, message, kind="structural",
                                   parameters={"calibrated_range": list(baseline.calibrated_range)},
                                   observed=None if reached is None else float(reached)))
    if baseline.calibrated_range is not None:
        beyond = sorted({s for s in list(steps) + list(current.eval_steps) if s > baseline.calibrated_range[1]})
        if beyond:
            results.append(CheckResult(
                "steps[uncalibrated]", INFO,
                f"steps {beyond[0]}-{beyond[-1]} are beyond the calibrated range "
                f"{baseline.calibrated_range[0]}-{baseline.calibrated_range[1]}: uncalibrated, not checked",
                kind="structural", parameters={"calibrated_range": list(baseline.calibrated_range)}))
    if baseline.wall_time_max_s is not None:
        results.append(_wall_time(baseline.wall_time_max_s, wall_time_s))
    return results


def _wall_time(max_s: float, wall_time_s: float | None) -> CheckResult:
    params = {"max_s": max_s}
    if wall_time_s is None:
        return CheckResult("wall_time", INFO, "end-to-end wall time not measured here (comparing an existing log); "
                           "the launcher measures it", kind="structural", parameters=params)
    ok = wall_time_s < max_s
    return CheckResult("wall_time", PASS if ok else FAIL,
                       f"end-to-end wall time {wall_time_s:.0f} s {'<' if ok else 'not <'} {max_s:.0f} s",
                       kind="structural", parameters=params, observed=wall_time_s)
