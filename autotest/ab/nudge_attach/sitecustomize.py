"""Put on an A/A run's PYTHONPATH by the harness: nudges the first optimizer step when RL_AUTOTEST_AA_NUDGE is set.

Unset, this file reads one environment variable and imports nothing else. Another ``sitecustomize`` further
on ``sys.path`` (a venv's, the consistency job's) still runs: this one only goes first.
"""

import os
import sys

if os.environ.get("RL_AUTOTEST_AA_NUDGE"):
    import rl_autotest_nudge

    rl_autotest_nudge.install()


def _run_the_next_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_rl_autotest_nudge_next_sitecustomize"] = module
    spec.loader.exec_module(module)


_run_the_next_sitecustomize()
