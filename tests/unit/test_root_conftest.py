"""The root conftest leaves tests/ uncollected for a suite-only marker expression (the main job's
`pytest -m grpo` on the grpo extra alone), and that is only right while no harness test carries those markers."""

from __future__ import annotations

import ast

import pytest

from conftest import SUITE_ONLY_MARKERS, TESTS, suite_only


@pytest.mark.parametrize("markexpr", ["grpo", "mopd", "grpo or mopd", "(grpo or gpu)"])
def test_a_suite_only_expression_skips_the_harness_tests(markexpr):
    assert suite_only(markexpr)


@pytest.mark.parametrize("markexpr", ["", "slow", "calibration", "grpo and slow", "not grpo", "grpo or slow",
                                      "grpo and not mopd"])
def test_any_other_expression_collects_them(markexpr):
    assert not suite_only(markexpr)


def _marks(node: ast.AST) -> set[str]:
    """Names of ``pytest.mark.<name>`` used in decorators and ``pytestmark`` assignments (not in strings:
    the plugin tests write suites for pytester as text)."""
    names = set()
    for child in ast.walk(node):
        if (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Attribute)
                and child.value.attr == "mark"):
            names.add(child.attr)
    return names


def test_no_harness_test_carries_a_suite_only_marker():
    carrying = sorted(str(path.relative_to(TESTS)) for path in TESTS.rglob("*.py")
                      if _marks(ast.parse(path.read_text(encoding="utf-8"))) & SUITE_ONLY_MARKERS)
    assert not carrying, f"these would be skipped by `pytest -m grpo` (conftest.SUITE_ONLY_MARKERS): {carrying}"


def test_the_callers_pytest_options_stop_at_this_session(monkeypatch):
    """The suite's own pytest subprocesses (project mode, the plugin) must not inherit PYTEST_ADDOPTS: -v would
    turn their `--collect-only -q` listings into trees. Options parsed from it stay with this session."""
    import argparse
    import os
    from types import SimpleNamespace

    import conftest

    monkeypatch.setenv("PYTEST_ADDOPTS", "-v --durations=0")
    monkeypatch.setenv("RL_AUTOTEST_PLOT_WORKER", "0")  # what the session set: left as it is
    config = SimpleNamespace(option=argparse.Namespace(numprocesses=2, dist="no"), getoption=lambda name: "")
    conftest.pytest_cmdline_main(config)
    assert "PYTEST_ADDOPTS" not in os.environ and config.option.dist == "worksteal"
