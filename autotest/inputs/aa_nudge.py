"""How the second run of an A/A pair is nudged: the ``paired.perturbation`` value of a baseline, read once.

    natural            no nudge: the platform's own non-determinism (a GPU's atomics, kernel choice)
    KEY=VALUE          one environment variable, e.g. RL_AUTOTEST_AA_PERTURB=1 (the embedded workloads read it)
    threads:N          N intra-op threads: OMP_NUM_THREADS=N and MKL_NUM_THREADS=N, which torch reads at start-up;
                       multi-threaded CPU reductions add in another order. A trainer that sets its own count
                       (``torch.set_num_threads``) wins, and kernels too small to split are not reordered
    optimizer-ulp:N    harness-made, no trainer edit: a ``sitecustomize`` first on PYTHONPATH moves 10% of the
                       trained weights one ulp at the first ``torch.optim`` step (autotest/attach)

The value is declared in :mod:`autotest.inputs.baseline_schema` (its kind ``nudge``); the environment a nudged run
gets is built by :mod:`autotest.ab.nudge`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NATURAL, ENV, THREADS, OPTIMIZER_ULP = "natural", "env", "threads", "optimizer-ulp"
FORMS = "natural, KEY=VALUE (e.g. RL_AUTOTEST_AA_PERTURB=1), threads:N or optimizer-ulp:N (N from 1 to 999999)"
#: the whole grammar (``--perturbation`` matches it too)
PATTERN = re.compile(r"(?P<natural>natural)|(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\x00-\x1f\x7f]*)"
                     r"|(?P<kind>threads|optimizer-ulp):(?P<count>[1-9][0-9]{0,5})")


@dataclass(frozen=True)
class Nudge:
    """One parsed ``paired.perturbation``: its form, the variable (``env``) and the value."""

    kind: str
    key: str = ""
    value: str = ""


def nudge_problem(text: object) -> str | None:
    """Why ``text`` is not a perturbation (None: it is one)."""
    try:
        parse_nudge(text)
    except ValueError as err:
        return str(err)
    return None


def parse_nudge(text: object) -> Nudge:
    """``text`` as a :class:`Nudge`; anything else raises ``ValueError`` saying so."""
    match = PATTERN.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a perturbation")
    if match["natural"]:
        return Nudge(NATURAL)
    if match["key"]:
        return Nudge(ENV, match["key"], match["value"])
    return Nudge(match["kind"], value=match["count"])
