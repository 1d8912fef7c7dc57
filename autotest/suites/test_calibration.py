"""The calibration suite (`pytest -m calibration`): re-measure each case's baseline from N runs.

Each case runs N times (the baseline's ``calibration.runs``, default 3) and a candidate baseline
with its diff report is written beside the current one (``<name>.candidate.yaml`` / ``.md``); the
baseline itself changes only with `rl-autotest baseline promote CASE` after review. It writes
files, so it never runs by default: only when the marker expression asks for ``calibration``.
A case that cannot run here is skipped with its reason (``--strict-cases``: fails). A tree with
uncommitted changes is refused unless ``--allow-dirty``.
"""

from __future__ import annotations

import pytest

from autotest.calibration.runs import (
    CalibrationOptions,
    calibrate_case,
    promote_command,
)
from autotest.calibration.thresholds import CalibrationError
from autotest.errors import UsageError
from autotest.plugin import config_request, selected_cases
from autotest.run.platform import check_platform


def calibration_selected(config: pytest.Config) -> bool:
    """Did the user ask for calibration (``-m calibration``), rather than just run everything?"""
    expression = config.getoption("markexpr") or ""
    return "calibration" in expression and "not calibration" not in expression


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    metafunc.parametrize("case", [pytest.param(c, id=c.name) for c in selected_cases(metafunc.config)])


@pytest.mark.calibration
@pytest.mark.slow
def test_calibrate_case(case, request):
    config = request.config
    if not calibration_selected(config):
        pytest.skip("calibration writes candidate baselines: run it with `pytest -m calibration`")
    platform = check_platform(case)
    if not platform.runnable:
        if config.getoption("--strict-cases"):
            pytest.fail(f"{case.name} cannot run here (strict mode): {platform.skip_reason}", pytrace=False)
        pytest.skip(f"{case.name}: {platform.skip_reason}")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    try:
        # every run derives from the session's one base request: --ray-jobs ($RAY_ADDRESS), resources, history
        options = CalibrationOptions(run=config_request(config), allow_dirty=config.getoption("--allow-dirty"),
                                     command=f"pytest -m calibration -k {case.name}",
                                     progress=reporter.write_line if reporter is not None else None)
        outcome = calibrate_case(case, options)
    except (CalibrationError, UsageError) as exc:
        pytest.fail(str(exc), pytrace=False)
    if outcome.self_check.false_alarms:
        pytest.fail("\n".join([f"{case.name}: candidate written, but the leave-one-out self-check raised "
                               f"{outcome.self_check.false_alarms} false alarm(s) in {len(outcome.runs)} runs",
                               *[f"  {w}" for w in outcome.warnings],
                               f"  review: {outcome.report}", f"  promote anyway: {promote_command(case)}"]),
                    pytrace=False)
    for useless in outcome.calibration.useless:
        print(f"{case.name}: {useless.line()}")
    print(f"{case.name}: candidate {outcome.candidate}; review {outcome.report}, then {promote_command(case)}")
