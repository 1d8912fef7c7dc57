"""How many replicates a verdict may take, and when replicates mean anything at all.

Replicates (``replicates: K`` in a case, ``--replicates K``) run K seeds side by side and judge their mean
(:mod:`autotest.judge.replicate_mean`). Two rules keep that bounded and real:

- a cap per platform, :data:`REPLICATE_CAPS` (a CPU case 8, a GPU case 4): above it the runs no longer fit
  one node side by side and a typo (``--replicates 1000``) would start a thousand trainings. ``--force-replicates``
  (the command line and pytest alike) lifts the cap; a case file is never above it.
- K > 1 needs a launch that takes the seed (``{seed}`` in launch, or ``seed.env``): K copies of one seed
  are not independent samples, and the K-replicate thresholds would be too tight for them.

The loader (:mod:`autotest.inputs.case`) and the pipeline (:func:`autotest.pipeline.run_case`) both ask
:func:`replicates_problem`, so the CLI, the pytest plugin and a case file get the same line.
"""

from __future__ import annotations

#: the most replicates of one verdict without --force, by platform (see the module docstring)
REPLICATE_CAPS = {"cpu": 8, "gpu": 4}
CAPS_HELP = f"at most {REPLICATE_CAPS['cpu']} on CPU, {REPLICATE_CAPS['gpu']} on GPU"


def platform_kind(gpus: int) -> str:
    return "gpu" if gpus > 0 else "cpu"


def replicates_problem(count: int, *, gpus: int, takes_seed: bool, force: bool = False,
                       in_case: bool = False) -> tuple[str, str] | None:
    """Why ``count`` replicates cannot run for a case on ``gpus`` GPUs, as (problem, what to do); None: they can.

    ``in_case``: the count is the case file's ``replicates:`` (the fix then says how to go past the cap).
    """
    if count <= 1:
        return None
    if not takes_seed:
        return (f"{count} replicates of a launch that takes no seed would be {count} copies of one seed",
                "use {seed} in launch.command or set seed.env, or run 1 replicate")
    kind = platform_kind(gpus)
    cap = REPLICATE_CAPS[kind]
    if count > cap and not force:
        fix = f"lower it, or run --replicates {count} --force-replicates" if in_case else "pass --force-replicates to run more"
        return f"{count} is above the cap of {cap} replicates for a {kind.upper()} case", fix
    return None


def replicates_cost(count: int, wall_time_s: float | None, jobs: int) -> str:
    """One line: the runs, the runner time they cost and the wall time to expect (from expected.wall_time_s)."""
    if wall_time_s is None:
        return (f"{count} runs, {jobs} at a time; expected wall time unknown (set expected.wall_time_s "
                "in the case to see the cost before launch)")
    rounds = -(-count // max(1, jobs))
    return (f"{count} runs x {_duration(wall_time_s)} = {_duration(count * wall_time_s)} of runner time; "
            f"{jobs} at a time: about {_duration(rounds * wall_time_s)} of wall time")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
