"""The check-kind registry: the built-in kinds, a third-party kind by entry point, and every bad plugin or
unknown scope as one line."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import autotest.scopes as scopes
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, FAIL, PASS
from tests.unit.judge.test_checks import trace

BUILT_IN = ("stepwise", "percentile", "breaches", "final", "points", "window", "pooled", "slope")
MEDIAN = "tests.unit.scopes.median_kind:Median"


@pytest.fixture
def plugins(monkeypatch):
    """Install fake ``rl_autotest.checks`` entry points (name -> target); the registry is restored after."""
    monkeypatch.setattr(scopes, "_KINDS", dict(scopes._KINDS))
    monkeypatch.setattr(scopes, "_PLUGINS", dict(scopes._PLUGINS))
    monkeypatch.setattr(scopes, "_plugins_loaded", False)

    def install(**targets: str) -> None:
        points = [EntryPoint(name, value, scopes.ENTRY_POINT_GROUP) for name, value in targets.items()]
        monkeypatch.setattr(scopes, "entry_points", lambda group: points if group == scopes.ENTRY_POINT_GROUP else [])
    return install


def _baseline_file(tmp_path, check: str):
    path = tmp_path / "b.yaml"
    path.write_text("golden: {table: {m: {1: 0.0, 2: 0.0, 3: 0.0}}}\n"
                    f"checks: [{{metric: m, method: absolute, operator: '<', threshold: 0.1, {check}}}]\n",
                    encoding="utf-8")
    return path


def test_the_built_in_kinds_in_the_order_the_docs_list_them(plugins):
    plugins()
    assert scopes.names() == BUILT_IN
    assert all(scopes.scope_kind(name).name == name for name in BUILT_IN)
    assert scopes.find(None) is None and scopes.find("resume") is None  # a structural check's scope


def test_an_unknown_scope_is_one_line_naming_the_known_ones_and_the_nearest(plugins, tmp_path):
    plugins()
    path = _baseline_file(tmp_path, "scope: stepwize")
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == (
        f"{path}: checks[0].scope: 'stepwize' is not a check kind (known: {', '.join(BUILT_IN)}); did you mean "
        "'stepwise'? write one of them (a third-party kind registers through the rl_autotest.checks entry point)")
    with pytest.raises(UsageError, match=r"^scope 'zzz' is not a check kind \(known: stepwise, .*\); write one"):
        scopes.scope_kind("zzz")


def test_a_plugin_kind_is_loaded_once_parsed_judged_described_and_written_back(plugins, tmp_path, monkeypatch):
    plugins(median=MEDIAN)
    b = load_baseline(_baseline_file(tmp_path, "scope: median, every: 2"))
    spec = b.checks[0]
    assert (spec.scope, spec.options, spec.check_id) == ("median", (("every", 2),), "m[median]")
    assert spec.describe() == "m: absolute < 0.1, median of per-step errors (every 2 steps)"
    assert "median" in scopes.names()
    golden = trace({"m": {1: 0.0, 2: 0.0, 3: 0.0}})
    ok = evaluate_check(spec, b, golden, trace({"m": {1: 0.05, 2: 0.5, 3: 0.05}}), True)
    assert (ok.status, ok.message, ok.parameters) == (PASS, "m: median absolute error 0.05 < 0.1", {"every": 2})
    bad = evaluate_check(spec, b, golden, trace({"m": {1: 0.5, 2: 0.0, 3: 0.5}}), True)
    assert bad.status == FAIL and bad.observed == 0.5
    assert "every: 2" in baseline_yaml(b)
    # loaded once: a second lookup reads no entry points
    monkeypatch.setattr(scopes, "entry_points", lambda group: pytest.fail("entry points read twice"))
    assert scopes.scope_kind("median") is scopes.scope_kind("median")


def test_a_plugin_key_on_another_kind_is_refused_naming_its_kind(plugins, tmp_path):
    plugins(median=MEDIAN)
    path = _baseline_file(tmp_path, "scope: final, every: 2")
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == f"{path}: checks[0].every: only applies to scope 'median', not 'final'; " \
                              "remove it or set scope: median"


@pytest.mark.parametrize("target,problem", [
    ("tests.unit.scopes.no_such_module:Median",
     "check kind plugin 'median' (tests.unit.scopes.no_such_module:Median) failed to load: ModuleNotFoundError: "
     "No module named 'tests.unit.scopes.no_such_module'; fix or uninstall the package that provides it"),
    ("tests.unit.scopes.median_kind:Missing",
     "check kind plugin 'median' (tests.unit.scopes.median_kind:Missing) failed to load: AttributeError: "),
    ("tests.unit.scopes.median_kind:NotAKind",
     "check kind plugin 'median' (tests.unit.scopes.median_kind:NotAKind): <class "
     "'tests.unit.scopes.median_kind.NotAKind'> is not a subclass of autotest.scopes.kind.Scope"),
    ("tests.unit.scopes.median_kind:NoEvaluate",
     "check kind plugin 'median' (tests.unit.scopes.median_kind:NoEvaluate): NoEvaluate defines no "
     "evaluate(spec, job)"),
    ("autotest.scopes.final:Final",
     "check kind plugin 'median' (autotest.scopes.final:Final): scope 'final' is already registered "
     "(autotest.scopes.final); rename the plugin's scope"),
])
def test_a_broken_plugin_is_one_line_naming_it(plugins, target, problem):
    plugins(median=target)
    with pytest.raises(UsageError) as info:
        scopes.names()
    assert str(info.value).startswith(problem) and "\n" not in str(info.value)
    assert info.value.__cause__ is None


def test_an_entry_point_named_apart_from_its_scope_is_refused(plugins):
    plugins(med=MEDIAN)
    with pytest.raises(UsageError, match=r"^check kind plugin 'med' \(.*\): entry point name 'med' differs from "
                                         r"its scope name 'median'; name the entry point after the scope$"):
        scopes.names()


def test_a_plugin_that_raises_is_one_line_or_an_error_naming_it_never_a_traceback(plugins, tmp_path):
    plugins(median="tests.unit.scopes.median_kind:Raising")
    path = _baseline_file(tmp_path, "scope: median, every: 0")
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == (
        f"{path}: checks[0].scope: check kind plugin 'median' (tests.unit.scopes.median_kind:Raising) failed to read "
        "the check: ZeroDivisionError: integer division or modulo by zero; fix or uninstall the package that "
        "provides it")
    b = load_baseline(_baseline_file(tmp_path, "scope: median"))
    r = evaluate_check(b.checks[0], b, trace({"m": {1: 0.0}}), trace({"m": {1: 0.0}}), True)
    assert (r.status, r.message) == (ERROR, "m: check kind plugin 'median' (tests.unit.scopes.median_kind:Raising) "
                                            "failed in evaluate: KeyError: 'golden'; fix or uninstall the package "
                                            "that provides it")


def test_a_plugin_whose_parse_returns_no_check_field_is_one_line(plugins, tmp_path):
    plugins(median="tests.unit.scopes.median_kind:WrongField")
    path = _baseline_file(tmp_path, "scope: median, every: 2")
    with pytest.raises(UsageError, match=r"checks\[0\]\.scope: check kind plugin 'median' \(.*\) returned every, no "
                                         r"field of a check; its parse returns check fields"):
        load_baseline(path)


@pytest.mark.parametrize("trait,kinds", [
    ("locates", {"stepwise", "percentile", "breaches", "final", "points"}),  # triage reads their first breach as the start
    ("uses_noise", {"pooled"}),
    ("per_step_growth", {"slope"}),
    ("plots_band", {"stepwise", "percentile", "breaches", "final", "points", "window"}),
])
def test_each_built_in_kind_has_the_traits_the_old_lists_gave_it(trait, kinds):
    assert {name for name in BUILT_IN if getattr(scopes.scope_kind(name), trait)} == kinds


def test_only_stepwise_points_percentile_breaches_window_and_pooled_decide_before_the_end():
    early = {name for name in BUILT_IN if type(scopes.scope_kind(name)).decide_early is not scopes.Scope.decide_early}
    assert early == {"stepwise", "points", "percentile", "breaches", "window", "pooled"}


def test_a_baseline_of_built_in_kinds_reads_no_entry_points(plugins, monkeypatch, tmp_path):
    monkeypatch.setattr(scopes, "entry_points", lambda group: pytest.fail("entry points read for a built-in"))
    assert load_baseline(_baseline_file(tmp_path, "scope: percentile, percentile: 80")).checks[0].percentile == 80
    assert scopes.scope_kind("pooled").uses_noise and scopes.find("slope").per_step_growth
