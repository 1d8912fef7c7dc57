"""pytest plugin: options, markers, the ``run_accuracy_case`` fixture and the end-of-session summary.

It only wires things up: running a case is :func:`autotest.pipeline.run_case`, shared with the CLI.
It loads in every pytest session of an environment that has rl-autotest installed, so it imports only
option parsing at load: the pipeline, the case reader, the history and the judge load when a case runs.
"""

from __future__ import annotations

import os
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pytest

from autotest.errors import UsageError
from autotest.inputs.project import find_project
from autotest.inputs.replicate_limits import CAPS_HELP
from autotest.redaction import collect_secrets
from autotest.run.interrupts import signals_as_interrupt

if TYPE_CHECKING:
    from autotest.ab.environment_fallback import EnvironmentFallback
    from autotest.ab.interleave import AbOutcome
    from autotest.pipeline import CaseRun
    from autotest.inputs.case import Case

MARKERS = {
    "grpo": "GRPO accuracy suite (launches a real training run)",
    "mopd": "MOPD accuracy suite (launches teachers and a real distillation run)",
    "gpu": "needs GPUs and a framework checkout",
    "calibration": "refreshes golden baselines from repeated runs (writes files; run only with -m calibration)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rl-autotest", "RL accuracy regression harness")
    group.addoption("--results-dir", default=None,
                    help="root folder for per-case results (default: $RL_AUTOTEST_RESULTS, else results/ "
                         "in the harness checkout)")
    group.addoption("--adaptive-replicates", type=int, default=None, metavar="K_MAX",
                    help="one seed per case, then K_MAX seeds on their mean when it lands near a pooled threshold")
    group.addoption("--strict-power", action="store_true",
                    help="a PASS whose gates cannot catch the case's declared detect: targets fails (nightly)")
    group.addoption("--strict-cases", action="store_true",
                    help="a case that cannot run here fails instead of skipping (nightly)")
    group.addoption("--dry-run", action="store_true",
                    help="print each case's experiment card and exact command; launch nothing")
    group.addoption("--fail-fast", action="store_true",
                    help="stop a run once a gate is decided failed (a per-step breach, a percentile gate past rescue)")
    group.addoption("--ray-address", default=None,
                    help="submit each case as a Ray job to this cluster (default: $RAY_ADDRESS when set)")
    group.addoption("--ray-resource", action="append", default=[], metavar="NAME=AMOUNT",
                    help="a custom resource each Ray job asks for, so it lands on a node that offers it")
    group.addoption("--gpu-wait-s", type=float, default=None,
                    help="how long a case waits for free GPUs on this node (default 21600 s: 6 h)")
    group.addoption("--history", default=None, metavar="URL",
                    help="run history database URL (default: $RL_AUTOTEST_HISTORY, else <results root>/history.sqlite)")
    group.addoption("--no-history", action="store_true", help="do not record verdicts in the run history")
    group.addoption("--strict-history", action="store_true",
                    help="a verdict the history could not record is an ERROR, not a warning (nightly)")
    group.addoption("--framework-ref", default=None,
                    help="framework ref to test (branch, tag, sha, refs/pull/N/head); default "
                         "$RL_AUTOTEST_FRAMEWORK_REF, else the case file's")
    group.addoption("--framework-repo", default=None,
                    help="framework repository (URL or local path); default $RL_AUTOTEST_FRAMEWORK_REPO, "
                         "else the case file's, else the clone its env var names")
    group.addoption("--ab-base", default=None, metavar="REF",
                    help="judge each case paired A/B: this REF as base, the --framework-ref (or the case as it is) "
                         "as head, on --replicates seeds (default 3); see docs/ab.md")
    group.addoption("--ab-split", action="store_true",
                    help="with --ab-base: a failed A/B also trains each side on the other's rollout batches, to say "
                         "whether the change lives in the trainer or the rollout (cases with a replay: section)")
    group.addoption("--ab-if-environment-changed", action="store_true",
                    help="nightly: a case whose golden was calibrated in another environment (packages, GPU, driver) "
                         "is judged A/B against the last trusted commit in the history instead (framework cases)")
    group.addoption("--replicates", type=int, default=None, metavar="K",
                    help="run K seeds of each case side by side and judge their mean (default: the case's replicates; "
                         f"{CAPS_HELP} without --force-replicates)")
    group.addoption("--force-replicates", action="store_true",
                    help="run more replicates than the platform's cap")
    group.addoption("--allow-dirty", action="store_true",
                    help="calibration: accept uncommitted changes (recorded in the provenance)")
    group.addoption("--packaged-cases", action="store_true",
                    help="in a project ([tool.rl-autotest]), also run the harness's packaged demo cases")


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
    replicates_option(config)  # a bad --replicates is one line before anything runs
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

        terminalreporter.section("rl-autotest cases")
        for run in self.runs:
            terminalreporter.write_line(run.summary_line())
            for warning in power_warnings(run.verdict) if run.verdict is not None else ():
                terminalreporter.write_line(f"  warning: {warning}")


def recorder_option(config: pytest.Config, warn: Callable[[str], None] | None = None):
    """Record every verdict in the run history unless --no-history; --strict-history makes a record that
    could not be written an ERROR verdict (else a warning through ``warn``)."""
    strict = config.getoption("--strict-history")
    if config.getoption("--no-history"):
        if strict:
            raise pytest.UsageError("--strict-history and --no-history contradict each other; drop one")
        return None
    from autotest.history.drift import history_recorder

    return history_recorder(config.getoption("--history"), strict=strict, warn=warn)


def replicates_option(config: pytest.Config) -> int | None:
    """--replicates K (K >= 1), else None: the case's own."""
    count = config.getoption("--replicates")
    if count is not None and count < 1:
        raise pytest.UsageError(f"--replicates: {count} is below 1; give the number of seeds to run and average")
    return count


def ray_resources_option(config: pytest.Config, address: str | None) -> dict[str, float]:
    """--ray-resource NAME=AMOUNT (repeatable); only with a Ray address to place the jobs on (a UsageError)."""
    from autotest.run.ray_tasks import requested_resources

    return requested_resources(address, config.getoption("--ray-resource"), "--ray-address or $RAY_ADDRESS")


def results_root_option(config: pytest.Config) -> Path | None:
    """--results-dir, else None: the pipeline's one default (see autotest.run.results_dir)."""
    option = config.getoption("--results-dir")
    return Path(option).resolve() if option else None


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
        from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case

        if isinstance(case, (str, Path)):
            try:
                case = load_case(case)
            except UsageError as exc:  # an unknown name or a bad case file: one line, as on the command line
                pytest.fail(str(exc), pytrace=False)

        ray_address = config.getoption("--ray-address") or os.environ.get("RAY_ADDRESS")
        try:
            recorder = recorder_option(config, warn=lambda line: live([f"warning: {line}"]))
            ray_resources = ray_resources_option(config, ray_address)
        except UsageError as exc:  # a malformed --history, $RL_AUTOTEST_HISTORY or --ray-resource: one line, first
            pytest.fail(f"{case.name}: {exc}", pytrace=False)
        launch = LaunchOptions(results_root=results_root or results_root_option(config), seed=seed, fault=fault,
                               framework_repo=config.getoption("--framework-repo"),
                               framework_ref=config.getoption("--framework-ref"),
                               ray_address=ray_address, ray_resources=ray_resources,
                               dry_run=config.getoption("--dry-run"), confirm=show_card)
        options = RunOptions(launch, JudgeOptions(replicates=replicates_option(config),
                                                  force_replicates=config.getoption("--force-replicates"),
                                                  adaptive_max=config.getoption("--adaptive-replicates"),
                                                  fail_fast=config.getoption("--fail-fast"),
                                                  strict_power=config.getoption("--strict-power")),
                             PublishOptions(after_results=recorder, progress=progress))
        if config.getoption("--gpu-wait-s") is not None:
            options = options.changed(launch={"gpu_wait_s": config.getoption("--gpu-wait-s")})
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

    count = config.getoption("--replicates") or 3
    try:
        base = parse_side(case, "ab-base", base_ref or config.getoption("--ab-base"))
        head = parse_side(case, "framework-ref", config.getoption("--framework-ref") or CLEAN)
        with signals_as_interrupt(), warnings.catch_warnings():
            warnings.simplefilter("default")
            return run_ab(case, base, head, AbOptions(seeds=ab_seeds(case, None, count),
                                                      results_root=results_root_option(config),
                                                      split=config.getoption("--ab-split") and case.replay is not None,
                                                      aa_check=aa_check))
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
    if outcome.split is not None:
        lines.append(f"  split: {outcome.split.finding.summary}; next: {outcome.split.finding.next_step}")
    lines.append(f"  report: {outcome.report}")
    pytest.fail("\n".join(lines), pytrace=False)


def assert_case_outcome(run: CaseRun, strict: bool) -> None:
    """Turn a CaseRun into the test's outcome: pass, skip (or fail when strict), or fail with the report."""
    from autotest.pipeline import DRY_RUN, SKIP
    from autotest.report.markdown import kind_phrase

    if run.status == SKIP:
        if strict:
            pytest.fail(f"{run.case} cannot run here (strict mode): {run.reason}", pytrace=False)
        pytest.skip(f"{run.case}: {run.reason}")
    if run.status == DRY_RUN:
        print(run.card)
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
