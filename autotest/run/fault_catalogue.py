"""Check a ``--fault NAME[:ARG]`` against the embedded workload's own catalogue, before anything launches.

An embedded case launches ``{python} -m autotest.workloads.<module>``; that program prints its fault
catalogue as JSON with ``--list-faults`` (a list of ``{name: ...}`` or a mapping keyed by name). The
harness asks the program rather than importing it: workloads are a separate program. A case of a
real framework has no catalogue to ask, so its faults are the framework's business.
"""

from __future__ import annotations

import json
import subprocess
import sys

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.run_flags import FAULT_SPEC

EMBEDDED_PREFIX = "autotest.workloads."
#: NAME[:ARG] as a fault is written: it becomes one argument of the launch, never an option or shell text
LIST_TIMEOUT_S = 60.0


def embedded_module(case: Case) -> str | None:
    """The ``-m`` module of an embedded case's launch command, else None."""
    command = case.launch.command
    if isinstance(command, str):
        return None
    for flag, module in zip(command, command[1:]):
        if flag == "-m" and module.startswith(EMBEDDED_PREFIX):
            return module
    return None


def fault_names(module: str, python: str = sys.executable) -> list[str] | None:
    """The catalogue's fault names, or None when the program cannot list them (the launch will say why)."""
    try:
        done = subprocess.run([python, "-m", module, "--list-faults"], capture_output=True, text=True,
                              timeout=LIST_TIMEOUT_S, check=False)
        data = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if isinstance(data, dict):
        return sorted(map(str, data))
    if isinstance(data, list) and all(isinstance(f, dict) and "name" in f for f in data):
        return [str(f["name"]) for f in data]
    return None


def check_fault(case: Case, fault: str | None) -> None:
    """One UsageError when ``fault`` is not NAME[:ARG], or not in the embedded case's catalogue."""
    if fault is not None and not FAULT_SPEC.fullmatch(fault):
        raise UsageError(f"--fault: {fault!r} is not a fault; write NAME or NAME:ARG (letters, digits, '.', '_', "
                         "'-'; the ARG also ',', '=', '+', '/')")
    module = embedded_module(case) if fault else None
    if module is None:
        return
    names = fault_names(module)
    if names is not None and fault.split(":", 1)[0] not in names:
        raise UsageError(f"--fault: {fault!r} is not a fault of {case.name}; choose one of {', '.join(names)} "
                         f"(python -m {module} --list-faults describes them)")
