"""Root conftest: every Ray the tests start stays local and quiet; the suite runs its longest files first on
work-stealing workers; `pytest -m grpo` (the main job) collects only the accuracy suites."""

import os
import signal

# Ray 2.60 enables token auth and usage reporting by default; tests only ever use local clusters.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# A suite started in the background of a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and
# so would every harness it starts: the Ctrl-C tests would then send a signal nobody hears. Handled here, it
# is reset to the default in each child at exec, so the children see Ctrl-C as a user's terminal sends it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from pathlib import Path

import pytest

from tests.run_order import prefer_worksteal, run_order


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Before xdist turns a bare ``-n`` into ``--dist load``: worksteal (tests/run_order.py)."""
    prefer_worksteal(config.option)
    # read by now: the tests' own pytest subprocesses must not inherit the caller's options (-v turns a
    # `--collect-only -q` listing into a tree; xdist workers get the parsed options, not the variable)
    os.environ.pop("PYTEST_ADDOPTS", None)
    if not suite_only(config.getoption("markexpr") or ""):
        # the harness's own tests count the processes a run leaves; whether a plot worker starts would
        # depend on the machine's load. Its tests start it themselves (tests/integration/report)
        os.environ.setdefault("RL_AUTOTEST_PLOT_WORKER", "0")


def pytest_collection_modifyitems(config, items):
    if config.rootpath == Path(__file__).resolve().parent:  # this checkout's suite, not a project's accuracy run
        for item in items:
            # the accuracy suites run real training (tiny-grpo, tiny-mopd): out of the quick tier,
            # `pytest -m "not slow"`; `pytest -m grpo` and the whole suite still run them
            if SUITES in item.path.parents:
                item.add_marker(pytest.mark.slow)
        items[:] = run_order(items)


#: markers only the accuracy suites (autotest/suites) carry: the harness's own tests under tests/ never do
#: (tests/unit/test_root_conftest.py holds that). calibration is not one: a harness test carries it.
SUITE_ONLY_MARKERS = frozenset({"grpo", "mopd", "gpu"})
TESTS = Path(__file__).resolve().parent / "tests"
SUITES = Path(__file__).resolve().parent / "autotest" / "suites"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`pytest -m grpo` (the main job) selects only the suites' cases, so tests/ is not even imported: the main
    job's install (scripts/bootstrap.sh, the grpo extra) lacks what the harness's own tests import, and
    collecting a thousand deselected tests is most of the command's start-up."""
    # called for each entry of a collected folder (never for the testpaths themselves): so for tests/'s entries
    if collection_path.parent == TESTS and suite_only(config.getoption("markexpr") or ""):
        return True
    return None


def suite_only(markexpr: str) -> bool:
    """True for an expression of suite-only markers joined by ``or`` (``grpo``, ``grpo or mopd``): one that
    no test under tests/ can match. ``not``, ``and`` or any other name keeps tests/ collected."""
    words = markexpr.replace("(", " ").replace(")", " ").split()
    names = [w for w in words if w != "or"]
    return bool(names) and all(name in SUITE_ONLY_MARKERS for name in names)
