"""The resume phase of one attempt: checkpoint in the main run, resume it in a second launch, collect its log.

A case with a ``resume:`` section (:mod:`autotest.inputs.resume_phase`) launches its main run with
``resume.checkpoint_args`` appended (:func:`checkpoint_args`). Once that run has completed (exit 0, every expected
step), :func:`launch_resumed` launches the same command again through the same launcher — its own work folder,
logs and tracker copy under ``<results>/resume/``, the fault (if any) injected again, ``resume.resume_args``
appended — and returns how it went (:class:`ResumedLaunch`); :func:`autotest.judge.resume.judge_resume` compares the
two logs, and its results go into the attempt's one verdict as structural results. An interrupt during the resumed
launch is returned, like the main launch's, after that launch is cleaned up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.files import make_folder
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.run.artifacts import artifacts_for
from autotest.run.launch import LaunchResult, LaunchSpec, RunInterrupted, launch_spec

#: the resumed run's folder inside the results folder (its logs/, work/, tracker copy)
RESUME_FOLDER = "resume"
#: the checkpoint's folder inside the main run's work folder (``{checkpoint_dir}``)
CHECKPOINT_FOLDER = "resume-checkpoint"


@dataclass(frozen=True)
class ResumedLaunch:
    """How the resumed launch went, for the comparison; ``skipped`` or ``problem`` when it did not launch."""

    result: LaunchResult | None = None
    #: the resumed run's tracker copy (or its own log when the copy found no room)
    tracker: Path | None = None
    tracker_problem: str | None = None
    #: why the phase did not run (the main run did not complete, was interrupted): INFO
    skipped: str | None = None
    #: why it could not run although it should have (no checkpoint, the launch could not be resolved): ERROR
    problem: str | None = None
    #: an interrupt during the resumed launch, raised by the pipeline after the verdict is published
    interrupt: RunInterrupted | None = None
    #: what the results context records under ``resume``
    context: dict[str, Any] = field(default_factory=dict)


def checkpoint_dir(work_dir: Path) -> Path:
    """``{checkpoint_dir}``: where the main run saves the checkpoint the resumed run loads."""
    return Path(work_dir).resolve() / CHECKPOINT_FOLDER


def _values(case: Case, work_dir: Path, seed: int | None, fault: str | None) -> dict[str, str]:
    assert case.resume is not None
    seed_value = case.seed.default if seed is None else seed
    return {**placeholder_values(repo=case.repo_root, work_dir=work_dir, seed=seed_value, fault=fault),
            "checkpoint_dir": str(checkpoint_dir(work_dir)), "resume_step": str(case.resume.at_step),
            "resume_last_step": str(case.resume.last_step)}


def _expanded(case: Case, key: str, args: tuple[str, ...], values: Mapping[str, str],
              environ: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(expand(case, f"resume.{key}[{i}]", a, values, environ) for i, a in enumerate(args))


def checkpoint_args(case: Case, work_dir: Path, *, seed: int | None, fault: str | None,
                    environ: Mapping[str, str]) -> tuple[str, ...]:
    """The main launch's extra arguments: save the checkpoint (none without a ``resume:`` section)."""
    if case.resume is None:
        return ()
    return _expanded(case, "checkpoint_args", case.resume.checkpoint_args, _values(case, work_dir, seed, fault),
                     environ)


def launch_resumed(case: Case, main_spec: LaunchSpec, work_dir: Path, results_dir: Path, *, seed: int | None,
                   fault: str | None, environ: Mapping[str, str], skip: str | None,
                   start: Callable[..., LaunchResult], start_kwargs: Mapping[str, Any],
                   progress: Callable[[str], None] | None = None) -> ResumedLaunch:
    """Launch the run resumed from the main run's checkpoint (not when ``skip`` says why the main run cannot be
    resumed) and collect its log; the comparison is :func:`autotest.judge.resume.judge_resume`."""
    resume = case.resume
    assert resume is not None
    if skip is not None:
        return ResumedLaunch(skipped=skip)
    folder = checkpoint_dir(work_dir)
    if not folder.is_dir() or not any(folder.iterdir()):
        return ResumedLaunch(problem=f"the main run left no checkpoint in {folder}; does its launch save one after "
                             f"step {resume.at_step} with resume.checkpoint_args {list(resume.checkpoint_args)}?")
    out = make_folder(Path(results_dir) / RESUME_FOLDER)
    resume_work = make_folder(out / "work")
    try:
        values = {**_values(case, resume_work, seed, fault), "checkpoint_dir": str(folder)}  # the main run's
        args = _expanded(case, "resume_args", resume.resume_args, values, environ)
        spec = launch_spec(case, resume_work, seed=seed, fault=fault, extra_args=args, environ=environ)
    except UsageError as exc:
        return ResumedLaunch(problem=str(exc))
    # the main run's environment (GPU slice, the caller's env), then the resumed run's own work folder and ports
    spec = replace(spec, env={**main_spec.env, **spec.env}, timeout_s=resume.timeout_s or spec.timeout_s)
    if progress:
        progress(f"[{case.name}] resume phase: steps {resume.at_step + 1}-{resume.last_step} from the checkpoint "
                 f"after step {resume.at_step}")
    started = time.time()
    interrupt = None
    try:
        result = start(spec, out, **start_kwargs)
    except RunInterrupted as exc:  # already stopped and cleaned up
        result, interrupt = exc.result, exc
    artifacts = artifacts_for(case, resume_work, out, since=started - 2, environ=environ)
    context = {"folder": str(out), "checkpoint_dir": str(folder), "command_line": spec.command_line,
               "stdout_log": str(result.stdout_log), "stderr_log": str(result.stderr_log),
               "tracker": str(artifacts.tracker) if artifacts.tracker else None, "wall_s": result.wall_s,
               "exit_code": result.exit_code}
    return ResumedLaunch(result=result, tracker=artifacts.judged_tracker,
                         tracker_problem=None if artifacts.judged_tracker else "; ".join(artifacts.notes) or
                         "no tracker found", interrupt=interrupt, context=context)
