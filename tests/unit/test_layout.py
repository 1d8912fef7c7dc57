"""The package's layout is its architecture: data flows inputs → run → judge → report, never back.

The log readers (``readers/``) turn a log into the judge's Trace and rank with it; their registry of formats
(records and plugin loading, no reading) and the console pattern (plain ``re``) rank with the inputs, so that
every list of formats (a case's ``tracker.format``, where a log is looked for, what a results folder copies)
derives from the one registry.

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
    "errors": 0, "files": 0, "own_time": 0, "redaction": 0, "terminal": 0, "shell_script": 0,
    "attach": 0,  # loaded by a run, not the harness: stdlib only, imports nothing of the package
    "inputs": 1, "scopes": 1,
    "run": 2,
    "judge": 3, "readers": 3,
    "report": 4,
    "pipeline": 5,
    "calibration": 6, "history": 6, "consistency": 6, "bisect": 6, "ab": 6,
    "cli": 7, "plugin": 7, "suites": 8,
}
#: modules ranked apart from their stage: the readers' records and patterns, read by the inputs and the launcher;
#: a consistency layout's grammar, checked where a case declares it
MODULE_RANKS = {"autotest.readers.registry": 1, "autotest.readers.console_pattern": 1,
                "autotest.consistency.layout": 1}
#: what the workloads (a separate program launched by the harness) may import from the harness
WORKLOAD_IMPORTS = ("autotest.errors", "autotest.own_time", "autotest.workloads",
                    "autotest.consistency.collect", "autotest.consistency.config", "autotest.consistency.correlation", "autotest.consistency.hook",
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
            # ``from autotest.readers import registry`` imports the module autotest.readers.registry
            folder = PACKAGE.parent.joinpath(*node.module.split("."))
            subs = [f"{node.module}.{a.name}" for a in node.names if (folder / f"{a.name}.py").is_file()]
            found += [(m, node.lineno) for m in subs or [node.module]]
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
        rank = MODULE_RANKS.get(module, RANKS[stage])
        for target, line in _imports(path):
            to = _stage(target)
            if to in RANKS and MODULE_RANKS.get(target, RANKS[to]) > rank:
                backwards.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {target}")
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
        if _stage(module) not in ("inputs", "run", "judge", "readers", "report", "pipeline",
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


def _module_of(target: str, known: set[str]) -> str | None:
    """The module an import names: itself, else its package (``from autotest.x import name`` names autotest.x)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def test_no_import_circles():
    """No module needs, directly or through others, a module that needs it back: not even inside a function,
    where a circle only moves the failure to run time (history.database ↔ history.record was one)."""
    known = {m.removesuffix(".__init__") for m, _ in _modules()}
    graph: dict[str, set[str]] = {}
    for module, path in _modules():
        name = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        annotations = _type_checking_only(tree)
        skipped = {n.lineno for n in ast.walk(tree) if id(n) in annotations}  # never run
        targets = {_module_of(t, known) for t, line in _imports(path) if line not in skipped}
        graph[name] = {t for t in targets if t and t != name and not name.startswith(t + ".")}
    circles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan: each strongly connected component of more than one module is a circle
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(" <-> ".join(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, "import circles:\n" + "\n".join(circles)
