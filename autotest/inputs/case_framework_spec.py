"""A case's ``framework_spec:`` key: the framework's own accuracy spec for this case, and whether the case follows it.

    framework_spec:
      path: autotest/config.yaml     the spec file in the framework's repository (read at the commit under test)
      case: qwen3-rl-lmdeploy        the case's name in that file
      mode: follow                   follow: the spec's environment is set for the run and its checks are the
                                     gate; own: the case's baseline gates, and the verdict names how they differ
      phase: first                   optional: the step, when the spec's case has several (first, resume)

Either way every verdict names each difference between the baseline's checks and environment and the spec at that
commit (docs/gpu-runners.md, "The framework's own spec"). The spec is read in the framework checkout, so the case must
run a framework (``platform.framework``) or belong to a project that names its checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from autotest.inputs.schema import Section

MODES = ("follow", "own")
KEY = "framework_spec"


@dataclass(frozen=True)
class FrameworkSpecRef:
    """Where a case's spec lives in the framework's repository and whether the case follows it."""

    #: the spec file, relative to the repository root (``autotest/config.yaml``)
    path: str
    #: the case's name in that file (``qwen3-rl-lmdeploy``)
    case: str
    #: ``follow``: the spec's environment and checks apply; ``own``: the baseline's, with the differences named
    mode: str
    #: the spec case's step (``phase:``) when it has several
    phase: str | None = None

    @property
    def follows(self) -> bool:
        return self.mode == "follow"


def parse_framework_spec(top: Section, has_checkout: bool) -> FrameworkSpecRef | None:
    """The validated ``framework_spec:`` key (None when absent); ``has_checkout``: the case runs a framework
    checkout the spec can be read in."""
    sec = top.section(KEY, optional=True)
    if sec is None:
        return None
    sec.check_keys(required=("path", "case", "mode"), optional=("phase",))
    path = sec.text("path")
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts or "\\" in path:
        sec.fail("path", f"{path!r} is not a path inside the framework's repository",
                 "write it relative to the repository root, e.g. autotest/config.yaml")
    if not has_checkout:
        top.fail(KEY, "the case runs no framework checkout to read the spec in",
                 "set platform.framework (or the project's framework checkout), or remove framework_spec")
    return FrameworkSpecRef(path=path, case=sec.text("case"), mode=sec.choice("mode", MODES),
                            phase=sec.text("phase", default=None))
