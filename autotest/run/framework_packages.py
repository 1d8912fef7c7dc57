"""The framework environment's package versions, read in its own Python, checked against the case.

A GPU node's torch, ray and lmdeploy belong to the framework's environment (``$FRAMEWORK_PYTHON`` or the
case's ``launch.python``), not to the harness venv, so the harness asks that interpreter
(``importlib.metadata``: nothing is imported, nothing installed) and records what it says in the
preflight. A case's ``platform.requires`` (e.g. ``{lmdeploy: ">=0.9"}``) is checked against those
versions before launch: a missing or mismatched package is one ERROR line, never a reinstall.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.run.isolation import PYTHON_ENV, resolve_python

PROBE_TIMEOUT_S = 60.0
_PROBE = """
import importlib.metadata as m, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


def framework_python(case: Case, environ: Mapping[str, str]) -> str | None:
    """The interpreter the run will use ($FRAMEWORK_PYTHON, else launch.python); None when the case names none.

    A case that names none but requires packages is checked in the ``python3`` the run finds on PATH.
    """
    wanted = environ.get(PYTHON_ENV) or case.launch.python
    if not wanted:
        if not case.platform.requires:
            return None
        wanted = "python3"
    where = f"environment: {PYTHON_ENV}" if environ.get(PYTHON_ENV) else f"{case.source}: launch.python"
    if not environ.get(PYTHON_ENV) and case.launch.python:
        wanted = expand(case, "launch.python", wanted, placeholder_values(repo=case.repo_root), environ)
    return str(resolve_python(wanted, where, environ))


def installed_versions(python: str, distributions: Iterable[str]) -> dict[str, str | None]:
    """``importlib.metadata.version`` of each distribution in ``python`` (None: not installed)."""
    names = sorted(set(distributions))
    try:
        done = subprocess.run([python, "-c", _PROBE, *names], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{python}: cannot list its packages ({exc}); point {PYTHON_ENV} at the framework's "
                         "python") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise UsageError(f"{python}: cannot list its packages ({last}); point {PYTHON_ENV} at the framework's "
                         "python")
    return json.loads(done.stdout.strip().splitlines()[-1])


def requirement_problems(case: Case, python: str | None, versions: Mapping[str, str | None]) -> list[str]:
    """One line per ``platform.requires`` entry the framework's Python does not satisfy."""
    problems = []
    for dist, spec in case.platform.requires.items():
        where = f"{case.source}: platform.requires.{dist}"
        found = versions.get(dist)
        if found is None:
            problems.append(f"{where}: {dist} is not installed in the framework's python {python} "
                            f"(needs {spec}); install it in the node's environment (the harness never does)")
            continue
        try:
            ok = Version(found) in SpecifierSet(spec, prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            problems.append(f"{where}: the framework's python {python} has {dist} {found}, the case needs {spec}; "
                            "use a node with a matching version or update the requirement with the baseline")
    return problems
