"""A case's ``tiers:`` section: shorter runs of the same training, each judged on the gates it can still judge.

    tiers:
      pr:
        steps: 30                          # train steps 1..30 of the full run, then stop
        args: [--stop-at-step, "30"]       # appended to launch.command: how this workload stops there

``rl-autotest run CASE --tier pr`` (pytest: ``--tier pr``) launches the case with ``args`` appended, expects
``steps`` steps, and judges only the gates whose steps the prefix holds (``autotest.judge.power_steps``); the
verdict states what it gave up against the full run (``autotest.judge.tier``). The harness cannot shorten a
workload on its own: ``args`` say how, and they must leave steps 1..N as the full run trains them (the same
schedule: the embedded GRPO workload's ``--stop-at-step`` keeps the LR schedule over all its steps), or the
golden of those steps does not apply. ``rl-autotest power CASE --steps`` shows what each length judges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autotest.inputs.placeholders import check_template
from autotest.inputs.schema import Section

#: a tier's name: a word (it is a flag's value and a folder-safe label)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Tier:
    """One shorter run of a case."""

    name: str
    steps: int
    """The steps it trains (1..steps of the full run)."""
    args: tuple[str, ...]
    """Appended to ``launch.command`` so the workload stops after ``steps``."""


def parse_tiers(sec: Section | None, full_steps: int | None, placeholders: tuple[str, ...]) -> dict[str, Tier]:
    """The validated ``tiers:`` section ({} when the case has none); each mistake one line naming the key.

    ``full_steps`` is the case's ``expected.steps``: a tier is shorter than the run it stands for."""
    if sec is None:
        return {}
    if full_steps is None:
        sec.fail("(section)", "declares tiers but expected.steps is not set",
                 "set expected.steps: a tier is a prefix of the full run's steps")
    tiers = {}
    for name in sec.data:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            sec.fail(str(name), "is not a tier name", "name it with a word, e.g. pr")
        tier = sec.section(name)
        assert tier is not None
        tier.check_keys(required=("steps", "args"), optional=())
        steps = tier.integer("steps", minimum=1, fix=f"write the steps it trains, 1 to {full_steps - 1}")
        if steps >= full_steps:
            tier.fail("steps", f"{steps} is not shorter than the full run's {full_steps} (expected.steps)",
                      f"write 1 to {full_steps - 1}, or drop the tier")
        args = tier.str_list("args")
        if not args:
            tier.fail("args", "is empty", "write the arguments that stop the workload after its steps, e.g. "
                      f"['--stop-at-step', '{steps}']")
        for i, arg in enumerate(args):
            check_template(tier, f"args[{i}]", arg, placeholders, shell=False)
        tiers[name] = Tier(name, steps, tuple(args))
    return tiers
