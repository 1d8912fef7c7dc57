"""Does a release still have the attach points? Read from its wheel without importing it (no CUDA needed).

Each point's module file is read out of the wheel (``zipfile``: only those files) and parsed with ``ast``;
the class must define the method, and the class must use ``self.<model>``'s first attribute. A release that
moved a point fails with the point's name: the table in :mod:`.attach.rl_autotest_collect` must follow it.
"""

from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path

from autotest.attach.rl_autotest_collect import POINTS, AttachPoint, Method

RELEASE = re.compile(r"^(?P<package>[A-Za-z0-9_.-]+)==(?P<version>[0-9][0-9A-Za-z.+-]*)$")
COMMIT = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40})$")


def released_points() -> dict[str, list[AttachPoint]]:
    """``package==version`` -> the points verified against that release."""
    out: dict[str, list[AttachPoint]] = {}
    for point in POINTS:
        if RELEASE.match(point.verified):
            out.setdefault(point.verified, []).append(point)
    return out


def module_files(method: Method) -> tuple[str, str]:
    """The two places a module can live in a wheel: ``a/b.py`` or ``a/b/__init__.py``."""
    base = method.module.replace(".", "/")
    return f"{base}.py", f"{base}/__init__.py"


def check_source(source: str, method: Method, model: str | None = None) -> list[str]:
    """What ``source`` (one module's text) lacks of ``method`` (and of ``self.<model>`` in its class)."""
    owner, _, name = method.qualname.rpartition(".")
    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner), None)
    if cls is None:
        return [f"{method.name}: no class {owner} in {method.module}"]
    defs = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    problems = [] if name in defs else [f"{method.name}: {owner} defines no {name}"]
    if model:
        first = model.split(".")[0]
        used = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == "self"}
        if first not in used:
            problems.append(f"{method.name}: {owner} never uses self.{first} (the model the point wraps)")
    return problems


def check_wheel(wheel: Path, points: list[AttachPoint]) -> list[str]:
    """Every problem of ``points`` in ``wheel``, each naming its point; empty when all resolve."""
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for point in points:
            for method in (point.forward, *point.weight_updates):
                found = next((f for f in module_files(method) if f in names), None)
                if found is None:
                    problems.append(f"{point.name}: {method.name}: {wheel.name} has no module {method.module}")
                    continue
                source = archive.read(found).decode("utf-8")
                model = point.model if method == point.forward else None
                problems += [f"{point.name}: {p}" for p in check_source(source, method, model)]
    return problems
