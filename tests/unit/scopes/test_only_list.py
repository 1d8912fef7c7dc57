"""The registry's list of check kinds is the only one: no module outside autotest/scopes/ (benchmarks included)
compares a scope with a name or keeps a list of scope names (a new kind is one module and its tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import autotest
from autotest.scopes import names

PACKAGE = Path(autotest.__file__).parent
SCOPES = PACKAGE / "scopes"
BENCHMARKS = PACKAGE.parent / "benchmarks"


def _is_scope(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "scope" or name.endswith("_scope")


def _literal_names(node: ast.AST) -> set[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_scope(s) for s in sides) and any(_literal_names(s) for s in sides if not _is_scope(s)):
                found.append(f"{path}:{node.lineno}: compares a scope with a name")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_literal_names(node) & set(names())) >= 2:
            found.append(f"{path}:{node.lineno}: a list of scope names")
    return found


def test_no_module_outside_the_scopes_package_names_a_scope():
    modules = [*sorted(PACKAGE.rglob("*.py")), *sorted(BENCHMARKS.rglob("*.py"))]
    offences = [o for path in modules if SCOPES not in path.parents for o in _offences(path)]
    assert not offences, "ask autotest.scopes (scope_kind/find) instead:\n" + "\n".join(offences)


def test_the_check_finds_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('if spec.scope == "pooled" or r.scope in ("final", "points"):\n    pass\n'
                   'KINDS = ("stepwise", "window")\nif check.scope == other.scope:\n    pass\n', encoding="utf-8")
    # the tuple of the ``in`` is a list of scope names too
    assert sorted(o.split(": ", 1)[1] for o in _offences(bad)) == [
        "a list of scope names", "a list of scope names", "compares a scope with a name",
        "compares a scope with a name"]
