"""A case's ``performance:`` section: how its timing gates are judged against the machine they ran on.

```yaml
performance:
  blocking: true          # false: performance gates are judged, reported and recorded, never failing the job
  normalise: contention   # contention (default): remove the time the run waited for a CPU, scale by the probe;
                          # raw: the logged step time as it is
  contention_budget:      # over any of these, a timing gate that only the contention explains is an environment
    run_delay_share: 0.15 #   outcome (exit 75, retry), not a FAIL: share of the run's runnable time spent waiting
    steal_share: 0.05     #   CPU time the hypervisor gave to other guests
    probe_wait_ratio: 1.5 #   the probe's wall time over its CPU time, before or after the run
    gpu_other_processes: 0  # processes on the case's GPUs that are not the run's
    gpu_throttle: true    #   a slowing throttle reason (HW slowdown, thermal, power brake) counts as contention
```

Accuracy gates never read any of this (see docs/running.md, "A busy runner").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotest.inputs.schema import Section

NORMALISE = ("contention", "raw")


@dataclass(frozen=True)
class ContentionBudget:
    """How much contention a run may see before a timing gate it fails is the machine's, not the code's."""

    run_delay_share: float = 0.15
    """Share of the run's runnable thread time spent waiting for a CPU (schedstat run delay)."""
    steal_share: float = 0.05
    """Share of the machine's CPU time the hypervisor gave to other guests."""
    probe_wait_ratio: float = 1.5
    """The machine probe's wall time over its CPU time, before or after the run."""
    gpu_other_processes: int = 0
    """Processes on the case's GPUs that are not the run's."""
    gpu_throttle: bool = True
    """Whether a slowing GPU throttle reason counts as contention."""


@dataclass(frozen=True)
class PerformancePolicy:
    """The ``performance:`` section of a case (defaults: blocking, normalised by contention and the probe)."""

    blocking: bool = True
    """False: performance gates are reported and recorded, never failing the job."""
    normalise: str = "contention"
    """``contention``: the step time less the run's wait for a CPU, scaled by the machine probe; ``raw``: as logged."""
    budget: ContentionBudget = field(default_factory=ContentionBudget)

    def to_dict(self) -> dict:
        return {"blocking": self.blocking, "normalise": self.normalise, "contention_budget": vars(self.budget)}


_SHARE = "write a share between 0 and 1"


def parse_performance(sec: Section | None) -> PerformancePolicy:
    if sec is None:
        return PerformancePolicy()
    sec.check_keys(required=(), optional=("blocking", "normalise", "contention_budget"))
    budget = ContentionBudget()
    found = sec.section("contention_budget", optional=True)
    if found is not None:
        found.check_keys(required=(), optional=tuple(vars(budget)))
        shares = {}
        for key in ("run_delay_share", "steal_share"):
            value = found.number(key, minimum=0.0, fix=_SHARE, default=getattr(budget, key))
            if value > 1:
                found.fail(key, f"{value:g} is above 1", _SHARE)
            shares[key] = value
        ratio = found.number("probe_wait_ratio", positive=True, default=budget.probe_wait_ratio,
                             fix="write a ratio >= 1 (the probe's wall time over its CPU time)")
        if ratio < 1:
            found.fail("probe_wait_ratio", f"{ratio:g} is below 1", "write a ratio >= 1 (1.5 allows a 50% wait)")
        budget = ContentionBudget(
            **shares, probe_wait_ratio=ratio,
            gpu_other_processes=found.integer("gpu_other_processes", minimum=0, default=budget.gpu_other_processes,
                                              fix="write how many other processes may share the case's GPUs"),
            gpu_throttle=found.boolean("gpu_throttle", default=budget.gpu_throttle))
    return PerformancePolicy(blocking=sec.boolean("blocking", default=True),
                             normalise=sec.choice("normalise", NORMALISE, default="contention"), budget=budget)
