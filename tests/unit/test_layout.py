"""The package's layout is its architecture: data flows inputs → run → judge → report, never back.

A stage imports only from earlier stages (or its own); the shells (cli, plugin, suites) sit on
top; the embedded workloads are a separate program that imports at most the light consistency
hook. The core stages import the package at module level only; the command shells (autotest/cli/ and each
subpackage's ``cli``/``*_cli`` module) import inside the function that runs a command, so that ``--help``
and the light commands load nothing heavy. The flow test walks every import, nested ones too, so no arrow
hides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autotest

PACKAGE = Path(autotest.__file__).parent

#: stage of each top-level module or subpackage; a module may import from stages of rank <= its own
RANKS = {
    "errors": 0, "files": 0, "redaction": 0,
    "inputs": 1,
    "run": 2,
    "judge": 3,
    "report": 4,
    "case_run": 5, "pipeline": 5, "run_replicates": 5,
    "calibration": 6, "history": 6, "consistency": 6, "bisect": 6,
    "cli": 7, "plugin": 7, "suites": 8,
}
#: what the workloads (a separate program launched by the harness) may import from the harness
WORKLOAD_IMPORTS = ("autotest.errors", "autotest.workloads", "autotest.consistency.collect",
                    "autotest.consistency.config", "autotest.consistency.correlation", "autotest.consistency.hook",
                    "autotest.consistency.msprobe_config")


def _modules() -> list[tuple[str, Path]]:
    return [(".".join(("autotest",) + path.relative_to(PACKAGE).with_suffix("").parts), path)
            for path in sorted(PACKAGE.rglob("*.py"))]


def _stage(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def _imports(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autotest"):
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("autotest")]
    return found


def test_every_stage_is_ranked():
    stages = {_stage(m) for m, _ in _modules()} - {"__init__", "workloads", "py"}
    assert stages <= set(RANKS), f"unranked stage(s): {stages - set(RANKS)}; add them to RANKS"


def test_no_import_points_back_up_the_flow():
    backwards = []
    for module, path in _modules():
        stage = _stage(module)
        if stage in ("workloads", "__init__"):
            continue
        for target, line in _imports(path):
            to = _stage(target)
            if to in RANKS and RANKS[to] > RANKS[stage]:
                backwards.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {stage} imports {target}")
    assert not backwards, "\n".join(backwards)


def test_workloads_never_import_the_harness():
    leaks = []
    for module, path in _modules():
        if _stage(module) != "workloads":
            continue
        leaks += [f"{path.relative_to(PACKAGE.parent)}:{line}: {target}" for target, line in _imports(path)
                  if not target.startswith(WORKLOAD_IMPORTS)]
    assert not leaks, "\n".join(leaks)


def _is_shell(module: str) -> bool:
    """A command shell: it imports each command's parts when the command runs (tests/integration/test_cli_imports.py)."""
    return _stage(module) == "cli" or module.rsplit(".", 1)[-1].endswith("cli")


#: modules a core stage may import inside a function, and why
DEFERRED = {"autotest.inputs.yaml_load": "PyYAML loads only when a file is read (start-up of --help)"}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Imports under ``if TYPE_CHECKING:`` (annotations only, never run)."""
    return {id(n) for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING" for n in node.body}


def test_core_stages_import_the_package_at_module_top():
    hidden = []
    for module, path in _modules():
        if _stage(module) not in ("inputs", "run", "judge", "report", "case_run", "pipeline", "run_replicates",
                                  "calibration") or _is_shell(module):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body} | _type_checking_only(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n and n.startswith("autotest") and n not in DEFERRED for n in names):
                    hidden.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {names[0]}")
    assert not hidden, "imports of the package inside functions:\n" + "\n".join(hidden)


def test_no_two_modules_share_a_name_for_different_jobs():
    names: dict[str, list[str]] = {}
    for module, _ in _modules():
        leaf = module.rsplit(".", 1)[-1]
        # a subpackage may have its own command shell, and consistency names its judgement and its
        # rendering the way the core does (verdict, report)
        if leaf not in ("__init__", "cli", "verdict", "report"):
            names.setdefault(leaf, []).append(module)
    shared = {leaf: mods for leaf, mods in names.items() if len(mods) > 1}
    assert not shared, shared
