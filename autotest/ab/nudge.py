"""The environment of an A/A pair's nudged run, from the paired section's ``perturbation`` (autotest.inputs.aa_nudge).

``calibrate --paired`` launches the second run of each pair with it, and ``ab --aa-check`` the base's second run.
Which nudge a case gets: ``--perturbation`` when given, else the one its baseline's ``paired:`` section declares
(a recalibration keeps it), else ``RL_AUTOTEST_AA_PERTURB=1`` for an embedded workload (it reads the variable)
and ``optimizer-ulp:1`` for any other trainer (the harness makes it; no trainer edit).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from autotest.attach import ATTACH_DIR  # put first on PYTHONPATH for ``optimizer-ulp:N``
from autotest.inputs.aa_nudge import ENV, FORMS, NATURAL, OPTIMIZER_ULP, THREADS, parse_nudge
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case import Case

#: what rl_autotest_nudge reads (kept in step with its ENV; it imports nothing of the harness)
NUDGE_ENV = "RL_AUTOTEST_AA_NUDGE"
#: the embedded workloads' own nudge (autotest.workloads.perturb)
EMBEDDED = "RL_AUTOTEST_AA_PERTURB=1"
HARNESS = f"{OPTIMIZER_ULP}:1"


def default_perturbation(case: Case, baseline: Baseline) -> str:
    """The nudge ``calibrate --paired`` uses when none is asked for (see the module doc)."""
    from autotest.run.fault_catalogue import embedded_module

    if baseline.paired is not None:
        return baseline.paired.perturbation
    return EMBEDDED if embedded_module(case) else HARNESS


def nudge_env(perturbation: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the nudged run adds; ``environ`` is the run's (its PYTHONPATH is kept behind ours)."""
    nudge = parse_nudge(perturbation)
    if nudge.kind == NATURAL:
        return {}
    if nudge.kind == ENV:
        return {nudge.key: nudge.value}
    if nudge.kind == THREADS:
        return {"OMP_NUM_THREADS": nudge.value, "MKL_NUM_THREADS": nudge.value}
    rest = (os.environ if environ is None else environ).get("PYTHONPATH", "")
    return {NUDGE_ENV: nudge.value, "PYTHONPATH": os.pathsep.join(p for p in (str(ATTACH_DIR), rest) if p)}


def no_effect_line(case: Case, perturbation: str, seeds: list[int], of: int) -> str:
    """The one line for A/A pairs whose two runs agreed bitwise on every paired metric: the nudge did not take."""
    which = "every A/A pair" if len(seeds) == of else f"A/A pair(s) of seed {', '.join(map(str, seeds))}"
    harness = parse_nudge(perturbation).kind == OPTIMIZER_ULP
    other = "threads:2" if harness else HARNESS
    why = (" (it takes only where the trainer's optimizer is a torch.optim.Optimizer and the launch keeps "
           "PYTHONPATH)") if harness else ""
    return (f"{which} agreed bitwise on every paired metric: the nudge {perturbation} had no effect on this "
            f"trainer{why}, so those pairs measured no noise; set another with `rl-autotest calibrate {case.name} "
            f"--paired --perturbation {other}` (one of {FORMS}; docs/ab.md, \"The nudge\")")
