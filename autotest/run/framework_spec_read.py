"""Read a case's framework spec at the commit under test, and apply it when the case follows it.

``git show <sha>:<path>`` in the framework checkout (the one the preflight names as the commit under test: a
fetched ref's worktree, the case's env-var checkout, or the project's framework checkout), never the file on disk: a
dirty tree or a file edited after checkout is not the spec of that commit. The parsing is
:mod:`autotest.inputs.framework_spec`; the comparison :mod:`autotest.judge.spec_diff`.

An absent spec (the file or the case not at that commit, the commit unknown) is stated, never an error. A spec that
cannot be read is one line naming ``file@sha``, the key and what to do: an ERROR before launch for a case that
follows it, a note in the verdict for one that holds its own.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case_framework_spec import FrameworkSpecRef
from autotest.inputs.case_model import Case
from autotest.inputs.framework_spec import ABSENT, COMPARED, UNREAD, FrameworkSpec, parse_spec
from autotest.inputs.framework_spec_checks import spec_checks
from autotest.inputs.yaml_load import load_yaml_text

GIT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SpecReading:
    """The spec as found at one commit; exactly one of ``spec``, ``absent`` and ``error`` says what was found."""

    ref: FrameworkSpecRef
    commit: str | None
    spec: FrameworkSpec | None = None
    #: why there is no spec to compare (the commit, the file or the case absent)
    absent: str = ""
    #: the one line saying why the spec could not be read
    error: str = ""
    #: the last commit at or before ``commit`` that changed the file
    changed_in: str | None = None

    @property
    def applies(self) -> bool:
        """The run follows the spec: follow mode and a spec read."""
        return self.ref.follows and self.spec is not None

    def provenance(self) -> dict[str, object]:
        """What a baseline's provenance records of the spec its runs saw."""
        return {"path": self.ref.path, "case": self.ref.case, "mode": self.ref.mode, "commit": self.commit,
                "changed_in": self.changed_in,
                "state": COMPARED if self.spec else UNREAD if self.error else ABSENT,
                **({"note": self.error or self.absent} if self.spec is None else {})}


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    # a spec file that is not UTF-8 still reads (its YAML error names the line), never a UnicodeDecodeError
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace",
                          timeout=GIT_TIMEOUT_S, check=False)


def read_spec(ref: FrameworkSpecRef, repo_dir: Path | str | None) -> SpecReading:
    """The spec ``ref`` names, at the commit checked out in ``repo_dir``."""
    if repo_dir is None:
        return SpecReading(ref, None, absent="not read: no framework checkout to read it in")
    repo = Path(repo_dir)
    try:
        head = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
        if head.returncode != 0:
            first = (head.stderr.strip().splitlines() or ["not a git checkout"])[0].removeprefix("fatal: ")
            return SpecReading(ref, None, absent=f"not read: the commit under test in {repo} is unknown ({first})")
        sha = head.stdout.strip()
        blob = f"{sha}:{ref.path}"
        if _git(repo, "cat-file", "-e", blob).returncode != 0:
            return SpecReading(ref, sha, absent=f"absent at {sha[:12]}: {ref.path} is not in that commit")
        shown = _git(repo, "show", blob)
        changed = _git(repo, "log", "-1", "--format=%H", sha, "--", ref.path).stdout.strip() or None
    except FileNotFoundError:
        return SpecReading(ref, None, absent="not read: git is not installed on this machine")
    except subprocess.TimeoutExpired:
        return SpecReading(ref, None, absent=f"not read: git took over {GIT_TIMEOUT_S:g} s in {repo}")
    where = f"{ref.path}@{sha[:12]}"
    if shown.returncode != 0:
        return SpecReading(ref, sha, error=f"{where}: git show failed ({shown.stderr.strip()[:200]})",
                           changed_in=changed)
    try:
        spec = parse_spec(load_yaml_text(shown.stdout, where), where, ref.case, ref.phase)
    except UsageError as exc:
        return SpecReading(ref, sha, error=str(exc), changed_in=changed)
    if spec is None:
        return SpecReading(ref, sha, absent=f"absent at {sha[:12]}: {ref.path} has no case {ref.case!r}",
                           changed_in=changed)
    return SpecReading(ref, sha, spec=spec, changed_in=changed)


def read_case_spec(case: Case, repo_dir: Path | str | None) -> SpecReading | None:
    """The case's spec at the commit in ``repo_dir``; None when the case names none."""
    ref = case.framework_spec
    return read_spec(ref, repo_dir) if ref is not None else None


def follow_case(case: Case, reading: SpecReading | None) -> Case:
    """``case`` as it runs when it follows its spec: the spec's settings over its launch env (the spec's own
    cluster paths are left to the case's inputs) and the spec's timeout; unchanged otherwise."""
    if reading is None or not reading.applies:
        return case
    spec = reading.spec
    assert spec is not None
    launch = replace(case.launch, env={**case.launch.env, **spec.settings},
                     timeout_s=spec.timeout_s if spec.timeout_s is not None else case.launch.timeout_s)
    return replace(case, launch=launch)


def follow_baseline(baseline: Baseline, reading: SpecReading | None) -> Baseline:
    """``baseline`` as the gate holds it: when following, the spec's checks replace the baseline's on every metric
    the spec checks (the baseline's golden values, steps and wall time stay); unchanged otherwise."""
    if reading is None or not reading.applies:
        return baseline
    spec = reading.spec
    assert spec is not None
    named = {c.metric for c in spec.checks}
    kept = tuple(c for c in baseline.checks if c.metric not in named)
    return replace(baseline, checks=(*spec_checks(spec), *kept))


def follow_problem(reading: SpecReading | None) -> str | None:
    """The preflight problem of a case that follows a spec that cannot be read (None: none)."""
    if reading is None or not reading.ref.follows or not reading.error:
        return None
    return f"{reading.error} (the case follows this spec: framework_spec.mode: follow)"




def import_spec(text: str, repo_dir: Path, flag: str = "--framework-spec") -> SpecReading:
    """``PATH:CASE`` (``autotest/config.yaml:qwen3-rl-lmdeploy``) read at the commit checked out in ``repo_dir``, for
    ``rl-autotest init`` to propose its checks; anything but a spec read is one UsageError naming ``flag``."""
    path, _, name = text.rpartition(":")
    if not path.strip() or not name.strip():
        raise UsageError(f"{flag}: {text!r} is not PATH:CASE; write e.g. autotest/config.yaml:qwen3-rl-lmdeploy")
    reading = read_spec(FrameworkSpecRef(path=path.strip(), case=name.strip(), mode="follow"), repo_dir)
    if reading.error:
        raise UsageError(reading.error)
    if reading.spec is None:
        raise UsageError(f"{flag}: {reading.absent} (read in {repo_dir}); run init from the framework's checkout, "
                         "or check the path and the case name")
    return reading
