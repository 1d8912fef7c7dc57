"""A recipe that is not there yet is a skip, not an error.

A case names files under the framework checkout (its config, its launch script: ``inputs`` and
``recipe.config`` below ``${XTUNER_ROOT}``). When the commit under test lacks them, the recipe has not been
merged yet (or was renamed), which is no regression: the run is a SKIP naming the paths, the commit and the ref
(``--strict-cases`` still fails it). When the case pins ``platform.framework.ref`` to a commit that has them,
the run goes there instead, and its card and verdict say so. A missing model or data share is not the
framework's: preflight keeps failing it fast. A pinned commit without them is an ERROR: the pin is broken.

:func:`decide` is the rule (pure); :func:`place_recipe` looks at the checkout and fetches the pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.run.framework import Checkout, FrameworkRequest, check_ref, checkout
from autotest.run.platform import framework_dir
from autotest.run.preflight import commit_under_test, input_statuses

RUN, SKIP, PIN, REFUSE = "run", "skip", "pin", "refuse"


@dataclass(frozen=True)
class FrameworkAt:
    """The framework commit whose files were looked at, and the ref that named it."""

    name: str
    sha: str | None
    ref: str
    origin: str

    def label(self) -> str:
        return f"{self.name} at {self.sha or 'an unknown commit'} ({self.ref})"


@dataclass(frozen=True)
class Absent:
    """Inputs missing at the commit under test: under the framework checkout (relative paths: the highest missing
    folder, ending in ``/``, or the file) and elsewhere (how many)."""

    in_checkout: tuple[str, ...] = ()
    elsewhere: int = 0


@dataclass(frozen=True)
class RecipeDecision:
    """``action``: run, skip (``reason`` says why), pin (run at the case's pin instead) or refuse (an ERROR)."""

    action: str
    reason: str = ""


def decide(absent: Absent, at: FrameworkAt, pin: str | None, *, at_pin: bool = False) -> RecipeDecision:
    """The rule. ``pin``: the case's ``platform.framework.ref``, when the ref under test came from elsewhere
    (command line, environment) and the pin may be tried instead; ``at_pin``: ``at`` is the pinned commit."""
    if not absent.in_checkout or absent.elsewhere:
        # nothing of the framework's is missing, or a share is too: preflight lists every missing input and fails
        return RecipeDecision(RUN)
    paths = ", ".join(absent.in_checkout)
    verb = "is" if len(absent.in_checkout) == 1 else "are"
    if at_pin:
        return RecipeDecision(REFUSE, f"{paths} {verb} not in {at.label()}, the commit the case pins "
                                      "(platform.framework.ref): the pin is broken; pin a commit that has them")
    if pin is not None:
        return RecipeDecision(PIN, f"the case's platform.framework.ref, since {at.ref} "
                                   f"({(at.sha or 'unknown')[:12]}) lacks {paths}")
    folders = all(p.endswith("/") for p in absent.in_checkout)
    why = "not merged yet?" if folders else "renamed, or not merged yet?"
    return RecipeDecision(SKIP, f"{paths} {verb} not in {at.label()}: {why}")


def absent_inputs(case: Case, environ: Mapping[str, str], root: Path) -> Absent:
    """The case's missing inputs (and ``recipe.config``), split into the checkout's and the rest."""
    root = root.resolve()
    missing = [Path(s.path) if s.path else None for s in input_statuses(case, environ) if not s.exists]
    if case.recipe is not None:
        try:
            config = case.resolve(expand(case, "recipe.config", case.recipe.config,
                                         placeholder_values(repo=case.repo_root), environ))
        except UsageError:
            config = None  # an unset variable: the guard says so before launch
        if config is not None and not config.exists():
            missing.append(config)
    mine: list[str] = []
    elsewhere = 0
    for path in missing:
        if path is None or not path.resolve().is_relative_to(root):
            elsewhere += 1
            continue
        shown = _first_missing(path.resolve(), root)
        if shown not in mine:
            mine.append(shown)
    return Absent(tuple(mine), elsewhere)


def _first_missing(path: Path, root: Path) -> str:
    """The highest part of ``path`` below ``root`` that does not exist: ``recipe/on_policy_distillation/``."""
    parts = path.relative_to(root).parts
    for depth in range(1, len(parts) + 1):
        if not (root.joinpath(*parts[:depth])).exists():
            shown = "/".join(parts[:depth])
            return shown if depth == len(parts) else shown + "/"
    return "/".join(parts)


def place_recipe(case: Case, environ: Mapping[str, str], request: FrameworkRequest | None,
                 framework: Checkout | None, cache_dir: Path) -> tuple[Checkout | None, RecipeDecision]:
    """The checkout to run at (the case's pin when the ref under test lacks its recipe) and the decision.

    ``framework``: the checkout the harness made for ``request``; None: the checkout the case's env var names."""
    fw = case.platform.framework
    if fw is None or (request is not None and framework is None):  # no framework, or a dry run checked none out
        return framework, RecipeDecision(RUN)
    if framework is not None:
        root, at = Path(framework.path), FrameworkAt(fw.name, framework.sha, framework.ref, framework.origin)
    else:
        local, _ = framework_dir(case, environ)
        if local is None:
            return framework, RecipeDecision(RUN)
        commit = commit_under_test(local)
        where = commit.branch or ("detached HEAD" if commit.sha else f"${fw.env}: {commit.reason}")
        root, at = local, FrameworkAt(fw.name, commit.sha, where, f"${fw.env}")
    pinned = request is not None and request.origin == "case file"
    pin = fw.ref if request is not None and not pinned and fw.ref else None
    decision = decide(absent_inputs(case, {**environ, fw.env: str(root)}, root), at, pin, at_pin=pinned)
    if decision.action != PIN:
        return framework, decision
    assert request is not None and pin is not None
    moved = replace(request, ref=check_ref(pin, f"{case.source}: platform.framework.ref"), origin=decision.reason)
    framework = checkout(moved, cache_dir)
    at = FrameworkAt(fw.name, framework.sha, framework.ref, framework.origin)
    root = Path(framework.path)
    return framework, decide(absent_inputs(case, {**environ, fw.env: str(root)}, root), at, None, at_pin=True)
