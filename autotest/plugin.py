"""pytest plugin: options, markers, the ``run_accuracy_case`` fixture and the end-of-session summary.

It only wires things up: running a case is :func:`autotest.pipeline.run_case`, shared with the CLI.
It loads in every pytest session of an environment that has rl-autotest installed, so it imports only
option parsing at load: the pipeline, the case reader, the history and the judge load when a case runs.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

from autotest.errors import UsageError
from autotest.inputs.project import find_project
from autotest.redaction import collect_secrets
from autotest.run.interrupts import signals_as_interrupt

if TYPE_CHECKING:
    from autotest.ab.environment_fallback import EnvironmentFallback
    from autotest.ab.interleave import AbOutcome
    from autotest.pipeline import CaseRun
    from autotest.pipeline.options import RunOptions
    from autotest.inputs.case import Case

MARKERS = {
    "grpo": "GRPO accuracy suite (launches a real training run)",
    "mopd": "MOPD accuracy suite (launches teachers and a real distillation run)",
    "gpu": "needs GPUs and a framework checkout",
    "calibration": "refreshes golden baselines from repeated runs (writes files; run only with -m calibration)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options, from the declared table (autotest.inputs.run_flags): the same spelling, help and
    bounds as the command line's; the values are checked in :func:`pytest_configure`."""
    from autotest.inputs.run_flags import FLAG, PAIRS, PYTEST, options_for, renamed_in

    group = parser.getgroup("rl-autotest", "RL accuracy regression harness")
    for option in options_for(PYTEST):
        names = (option.pytest, *renamed_in(option, PYTEST))
        if option.kind == FLAG:
            group.addoption(*names, dest=option.dest, action="store_true", help=option.help_for(PYTEST))
        else:
            group.addoption(*names, dest=option.dest, metavar=option.metavar, help=_pytest_help(option),
                            **({"action": "append", "default": []} if option.kind == PAIRS else {"default": None}))


def _pytest_help(option) -> str:
    from autotest.inputs.run_flags import RESULTS_DEFAULT

    return option.help_for("pytest").replace(RESULTS_DEFAULT, "$RL_AUTOTEST_RESULTS, else the project's results")


_VALUES = pytest.StashKey[dict]()


def declared_values(config: pytest.Config) -> dict[str, Any]:
    """Every declared option's value, converted and checked (a bad one: one usage line); an old spelling given
    is named once with its new one."""
    from autotest.inputs.run_flags import PYTEST, convert, options_for, rename_notice, renamed_in

    if _VALUES in config.stash:
        return config.stash[_VALUES]
    given = [str(arg) for arg in config.invocation_params.args]
    values = {}
    for option in options_for(PYTEST):
        for old in renamed_in(option, PYTEST):
            if any(arg == old or arg.startswith(old + "=") for arg in given):
                print(rename_notice(old, option), file=sys.stderr)
        raw = config.getoption(option.dest)
        try:
            values[option.dest] = [convert(option, r) for r in raw] if isinstance(raw, list) else convert(option, raw)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:  # the resources need a cluster to place on: checked with the values, before any case
        _ray_resources(values)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_VALUES] = values
    return values


SUITES = Path(__file__).resolve().parent / "suites"


def _collect_suites_in_project(config: pytest.Config) -> None:
    """In a project, ``pytest -m grpo`` collects the accuracy suites from the installed harness (the
    harness's own pytest.ini does it through testpaths): only when a marker of ours is asked for and no
    paths were named."""
    words = set((config.getoption("markexpr") or "").replace("(", " ").replace(")", " ").split())
    if not words & set(MARKERS) or config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    try:
        project = find_project()
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if project is not None and not any(Path(a).resolve() == SUITES for a in config.args):
        config.args.append(str(SUITES))


def selected_cases(config: pytest.Config) -> list[Case]:
    """The cases the suites run: the project's (and the packaged demo with --packaged-cases), else the demo.

    A bad project table or case file is one usage line, not a collection traceback."""
    from autotest.inputs.case import list_cases

    try:
        return list_cases(packaged=bool(config.getoption("--packaged-cases")))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    collect_secrets(argv=config.invocation_params.args)  # secret values are masked in everything written
    declared_values(config)  # a bad value of any option is one line before anything runs
    _collect_suites_in_project(config)
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    # the suites mark calibration slow; a user's project does not register it (PytestUnknownMarkWarning there)
    config.addinivalue_line("markers", "slow: takes more than ~20 s on 2 cores (an accuracy or calibration run)")
    config.pluginmanager.register(CaseSummary(config), "rl-autotest-summary")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Calibration writes baselines: it runs only when the marker expression asks for it."""
    if "calibration" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("calibration") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


class CaseSummary:
    """Collects every case run and prints one table at the end of the session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.runs: list[CaseRun] = []

    def add(self, run: CaseRun) -> None:
        self.runs.append(run)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Exit 75 when every failed test is an environment outcome (a busy runner): CI retries, never merges."""
        from autotest.cli.common import EXIT_ENVIRONMENT

        environment = sum(1 for run in self.runs if run.verdict is not None and run.verdict.environment_only)
        if exitstatus == pytest.ExitCode.TESTS_FAILED and environment and session.testsfailed == environment:
            session.exitstatus = EXIT_ENVIRONMENT

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.runs:
            return
        from autotest.judge.power import power_warnings
        from autotest.judge.tier import tier_lines

        terminalreporter.section("rl-autotest cases")
        for run in self.runs:
            terminalreporter.write_line(run.summary_line())
            for warning in power_warnings(run.verdict) if run.verdict is not None else ():
                terminalreporter.write_line(f"  warning: {warning}")
            for line in tier_lines(run.verdict):
                terminalreporter.write_line(f"  {line}")


def recorder_option(config: pytest.Config, warn: Callable[[str], None] | None = None):
    """Record every verdict in the run history unless --no-history; --strict-history makes a record that
    could not be written an ERROR verdict (else a warning through ``warn``)."""
    strict = config.getoption("strict_history")
    if config.getoption("no_history"):
        if strict:
            raise pytest.UsageError("--strict-history and --no-history contradict each other; drop one")
        return None
    from autotest.history.drift import history_recorder

    return history_recorder(declared_values(config)["history"], strict=strict, warn=warn)


def results_root_option(config: pytest.Config) -> Path | None:
    """--results-dir, else None: the pipeline's one default (see autotest.run.results_dir)."""
    option = declared_values(config)["results_dir"]
    return Path(option).resolve() if option else None


def _ray_resources(values: dict[str, Any]) -> tuple[str | None, dict[str, float]]:
    """The Ray jobs' address (--ray-jobs, else $RAY_ADDRESS) and the resources each asks for."""
    from autotest.inputs.run_flags import BY_FLAG, PYTEST
    from autotest.run.ray_tasks import requested_resources

    address = values["ray_jobs"] or os.environ.get(BY_FLAG["--ray-jobs"].env_for(PYTEST) or "")
    return address, requested_resources(address, values["ray_resource"], "--ray-jobs or $RAY_ADDRESS")


def config_request(config: pytest.Config, *, progress: Callable[[str], None] | None = None,
                   confirm: Callable[[str], bool] | None = None, warn: Callable[[str], None] | None = None
                   ) -> RunOptions:
    """The base request of every run in this session (a case's, an A/B side's, a calibration run's): each
    declared option in its field, the Ray jobs ($RAY_ADDRESS by default) and the history hook.

    A malformed --history or $RL_AUTOTEST_HISTORY is a UsageError."""
    from autotest.inputs.run_flags import PYTEST, request_fields
    from autotest.pipeline.options import RunOptions

    values = declared_values(config)
    fields = request_fields(PYTEST, values)
    address, resources = _ray_resources(values)
    fields.update({"launch.results_root": results_root_option(config), "launch.ray_address": address,
                   "launch.ray_resources": resources,
                   "publish.after_results": recorder_option(config, warn), "publish.progress": progress,
                   "launch.confirm": confirm})
    return RunOptions().with_fields(fields)


@pytest.fixture
def run_accuracy_case(request: pytest.FixtureRequest) -> Callable[..., CaseRun]:
    """Run a case end to end (``run_accuracy_case(case, fault=None, seed=None)``) and return its CaseRun;
    ``case`` is a loaded Case, a case name (the project's cases, then the packaged demo) or a case file."""
    config = request.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def live(lines: list[str]) -> None:
        """Write to the terminal (or CI log) while the test runs, past pytest's output capture."""
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
            for line in lines:
                reporter.write_line(line)

    def progress(line: str) -> None:
        live([line])

    def show_card(card: str) -> bool:
        """The experiment card is printed before launching (and saved as card.md in the results)."""
        live(["", *card.splitlines()])
        return True

    def run(case: Case | str | Path, *, fault: str | None = None, seed: int | None = None,
            results_root: Path | None = None) -> CaseRun:
        from autotest.inputs.case import load_case
        from autotest.pipeline import run_case

        if isinstance(case, (str, Path)):
            try:
                case = load_case(case)
            except UsageError as exc:  # an unknown name or a bad case file: one line, as on the command line
                pytest.fail(str(exc), pytrace=False)

        try:
            options = config_request(config, progress=progress, confirm=show_card,
                                     warn=lambda line: live([f"warning: {line}"]))
        except UsageError as exc:  # a malformed --history, $RL_AUTOTEST_HISTORY or --ray-resource: one line, first
            pytest.fail(f"{case.name}: {exc}", pytrace=False)
        options = options.changed(launch={"results_root": results_root or options.launch.results_root, "seed": seed,
                                          "fault": fault})
        if options.launch.tier and options.launch.tier not in case.tiers:  # --tier pr: the cases that declare it
            pytest.skip(f"{case.name}: declares no {options.launch.tier} tier (tiers: in the case)")
        try:
            with signals_as_interrupt(), warnings.catch_warnings():  # CI cancels with SIGTERM: as Ctrl-C
                # a warning in the harness's own code never fails a user's accuracy run (filterwarnings=error)
                warnings.simplefilter("default")
                outcome = run_case(case, options)
        except UsageError as exc:  # a bad ref or repository: one line, not a traceback
            pytest.fail(f"{case.name}: {exc}", pytrace=False)
        summary = config.pluginmanager.get_plugin("rl-autotest-summary")
        if summary is not None:
            summary.add(outcome)
        return outcome

    return run


def run_ab_case(config: pytest.Config, case: Case, base_ref: str | None = None, aa_check: bool = False
                ) -> AbOutcome:
    """``--ab-base``: the case A/B, base the option's REF (or ``base_ref``), head the ``--framework-ref`` or the
    case as it is; ``aa_check`` adds the A/A guard (autotest.ab.interleave)."""
    from autotest.ab.interleave import AbOptions, run_ab
    from autotest.ab.sides import CLEAN, parse_side
    from autotest.ab.ab_preflight import ab_seeds

    values = declared_values(config)
    count = values["replicates"] or 3
    try:
        base = parse_side(case, "ab-base", base_ref or values["ab_base"])
        head = parse_side(case, "framework-ref", values["framework_ref"] or CLEAN)
        request = config_request(config)
        with signals_as_interrupt(), warnings.catch_warnings():
            warnings.simplefilter("default")
            return run_ab(case, base, head, AbOptions(seeds=ab_seeds(case, None, count),
                                                      results_root=results_root_option(config),
                                                      split=values["ab_split"] and case.replay is not None,
                                                      aa_check=aa_check, run=request))
    except UsageError as exc:
        pytest.fail(f"{case.name}: {exc}", pytrace=False)


def environment_fallback_of(config: pytest.Config, case: Case) -> EnvironmentFallback | None:
    """``--ab-if-environment-changed``: the A/B to run instead of the golden gate, or None (the reason is printed)."""
    from autotest.ab.environment_fallback import environment_fallback
    from autotest.history.store import open_for_reading
    from autotest.inputs.baseline import load_baseline
    from autotest.run.preflight import environment_fingerprint, framework_environment
    from autotest.run.results_dir import default_results_root

    try:
        baseline = load_baseline(case.baseline_path)
    except UsageError:
        return None  # the golden run reports the baseline it cannot load
    today = {**environment_fingerprint(), "framework": framework_environment(case)}
    try:
        with open_for_reading(config.getoption("--history"), results_root_option(config) or default_results_root()
                              ) as store:
            runs = store.runs(case.name, trusted_only=True)
    except UsageError:  # no history yet: nothing to go back to
        runs = []
    fallback, why = environment_fallback(case, baseline, today, runs)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"{case.name}: {fallback.line() if fallback is not None else why}")
    return fallback


def assert_ab_outcome(outcome: AbOutcome, preface: str = "") -> None:
    """PASS passes; a moved paired gate or an A/B that judged nothing fails with the report's lines."""
    if outcome.status == "PASS":
        return
    lines = [f"{outcome.case}: A/B {outcome.base.ref} -> {outcome.head.ref}: {outcome.status}"]
    lines += [f"  ({preface})"] if preface else []
    lines += [f"  {r.status} {r.message}" for r in outcome.verdict.results if r.status != "PASS"]
    if outcome.verdict.reason:
        lines.append(f"  not judged: {outcome.verdict.reason}")
    if outcome.verdict.next_step:
        lines.append(f"  next step: {outcome.verdict.next_step}")
    if outcome.split is not None:
        lines.append(f"  split: {outcome.split.finding.summary}; next: {outcome.split.finding.next_step}")
    lines.append(f"  report: {outcome.report}")
    pytest.fail("\n".join(lines), pytrace=False)


def assert_case_outcome(run: CaseRun, strict: bool) -> None:
    """Turn a CaseRun into the test's outcome: pass, skip (or fail when strict), or fail with the report."""
    from autotest.pipeline import DRY_RUN, SKIP
    from autotest.report.markdown import kind_phrase
    from autotest.terminal import echo

    if run.status == SKIP:
        if strict:
            pytest.fail(f"{run.case} cannot run here (strict mode): {run.reason}", pytrace=False)
        pytest.skip(f"{run.case}: {run.reason}")
    if run.status == DRY_RUN:
        echo(*run.card.splitlines())  # stored text (a case's description, a path): escaped
        pytest.skip(f"{run.case}: dry run; command: {run.command_line}")
    if run.unsaved:  # the verdict stands, but its results folder is incomplete: never a silent pass
        pytest.fail(run.summary_line(), pytrace=False)
    if run.status != "PASS":
        assert run.verdict is not None
        lines = [f"{run.case}: {run.status}{kind_phrase(run.verdict)}"]
        lines += [f"  {r.status} {r.check_id}: {r.message}" for r in run.verdict.failing() if r.is_gate]
        if run.reason:
            lines.append(f"  next step: {run.reason}")
        lines.append(f"  report: {run.report}")
        if run.consistency_request:
            lines.append(f"  consistency dump requested: {run.consistency_request}")
        pytest.fail("\n".join(lines), pytrace=False)
