"""A case's ``resume:`` section: stop a run at a checkpoint, resume it, and hold the resumed steps against the
uninterrupted run's.

```yaml
resume:
  at_step: 20              # the main run saves a checkpoint after this step (and runs on to the end)
  steps: 3                 # the resumed run trains at_step+1 .. at_step+steps, then stops
  checkpoint_args: [--save-checkpoint-at, "{resume_step}", --checkpoint-dir, "{checkpoint_dir}"]
  resume_args: [--resume-from, "{checkpoint_dir}", --stop-at-step, "{resume_last_step}"]
  match: bitwise           # bitwise: every logged metric equal; noise: within noise_ratio of the calibrated noise
  noise_ratio: 0.5         # match: noise only (default 0.5)
  roles: {train_metrics/worker_0/lr: learning_rate}   # roles of logged metrics the baseline does not check
  timeout_s: 120           # the resumed launch's limit (default launch.timeout_s)
```

``checkpoint_args`` are appended to the main launch, ``resume_args`` (with ``launch.fault_args`` when a fault is
injected) to a second launch of the same command in its own work folder. Both take the launch placeholders and
``{checkpoint_dir}`` (a folder in the main run's work folder), ``{resume_step}`` (``at_step``) and
``{resume_last_step}`` (``at_step + steps``). What the comparison does: :mod:`autotest.judge.resume`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotest.inputs.placeholders import check_template
from autotest.inputs.roles import check_role
from autotest.inputs.schema import Section, fail

MATCHES = ("bitwise", "noise")
#: the placeholders only the resume phase's arguments take
RESUME_PLACEHOLDERS = ("checkpoint_dir", "resume_step", "resume_last_step")
DEFAULT_NOISE_RATIO = 0.5


@dataclass(frozen=True)
class Resume:
    """The ``resume:`` section of a case."""

    at_step: int
    """The step after which the main run saves its checkpoint."""
    steps: int
    """How many steps the resumed run trains (at_step + 1 .. at_step + steps)."""
    checkpoint_args: tuple[str, ...]
    """Appended to the main launch: save a checkpoint after ``at_step``."""
    resume_args: tuple[str, ...]
    """Appended to the resumed launch: resume from the checkpoint and stop after ``steps`` steps."""
    match: str = "bitwise"
    """``bitwise`` (a deterministic workload) or ``noise`` (within ``noise_ratio`` of the calibrated noise)."""
    noise_ratio: float = DEFAULT_NOISE_RATIO
    """``match: noise``: the largest mean |resumed - uninterrupted| / calibrated noise over the resumed steps."""
    roles: dict[str, str] = field(default_factory=dict)
    """Roles of logged metrics the baseline does not check (triage reads them: which state did not continue)."""
    timeout_s: float | None = None
    """The resumed launch's wall-clock limit (None: ``launch.timeout_s``)."""

    @property
    def last_step(self) -> int:
        """The last step the resumed run trains."""
        return self.at_step + self.steps


def parse_resume(sec: Section | None, placeholders: tuple[str, ...], expected_steps: int,
                 tracker_path: str | None) -> Resume | None:
    """The validated ``resume:`` section (None when the case has none); each mistake one line naming the key."""
    if sec is None:
        return None
    sec.check_keys(required=("at_step", "steps", "checkpoint_args", "resume_args"),
                   optional=("match", "noise_ratio", "roles", "timeout_s"))
    at_step = sec.integer("at_step", minimum=1, fix="write the step after which the main run saves a checkpoint")
    if at_step >= expected_steps:
        sec.fail("at_step", f"{at_step} is not before the run's last step ({expected_steps}, expected.steps)",
                 "checkpoint at an earlier step, so the resumed run has steps to compare")
    steps = sec.integer("steps", minimum=1, fix="write how many steps the resumed run trains (a few are enough)")
    if at_step + steps > expected_steps:
        sec.fail("steps", f"at_step + steps = {at_step + steps} is past the run's last step ({expected_steps})",
                 f"resume for at most {expected_steps - at_step} steps")
    allowed = (*placeholders, *RESUME_PLACEHOLDERS)
    args = {}
    for key in ("checkpoint_args", "resume_args"):
        args[key] = sec.str_list(key)
        if not args[key]:
            sec.fail(key, "is empty", "give the flags of your trainer, e.g. [--resume-from, '{checkpoint_dir}']")
        for i, arg in enumerate(args[key]):
            check_template(sec, f"{key}[{i}]", arg, allowed, shell=False)
        if not any("{checkpoint_dir}" in a for a in args[key]):
            sec.fail(key, "does not use {checkpoint_dir}",
                     "pass the folder the checkpoint goes to and comes from, e.g. '{checkpoint_dir}'")
    match = sec.choice("match", MATCHES, default="bitwise")
    if "noise_ratio" in sec.data and match != "noise":
        sec.fail("noise_ratio", "applies to match: noise only", "remove it, or write match: noise")
    ratio = sec.number("noise_ratio", positive=True, default=DEFAULT_NOISE_RATIO,
                       fix="write the largest mean |difference| / calibrated noise allowed, e.g. 0.5")
    roles = sec.str_map("roles", default={})
    for metric, role in roles.items():
        problem = check_role(role)
        if problem:
            sec.fail(f"roles.{metric}", *problem)
    if tracker_path is not None and "{work_dir}" not in tracker_path:
        fail(sec.path, sec.where, f"tracker.path {tracker_path!r} would be one log for both runs",
             "put {work_dir} in tracker.path, so the resumed run writes a log of its own")
    return Resume(at_step=at_step, steps=steps, checkpoint_args=args["checkpoint_args"],
                  resume_args=args["resume_args"], match=match, noise_ratio=ratio, roles=roles,
                  timeout_s=sec.number("timeout_s", positive=True, default=None,
                                       fix="write a positive number of seconds"))
