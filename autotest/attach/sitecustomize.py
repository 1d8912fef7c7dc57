"""Put first on a run's PYTHONPATH by the harness: installs what the run's environment asks for.

``RL_AUTOTEST_COLLECT`` (the consistency job) installs the collection of :mod:`rl_autotest_collect`;
``RL_AUTOTEST_AA_NUDGE`` (an A/A pair's nudged run) the nudge of :mod:`rl_autotest_nudge`. Unset, this file reads
those variables and imports nothing else. Another ``sitecustomize`` further on ``sys.path`` (a venv's, a
distribution's) still runs: this one only goes first.
"""

import importlib
import os
import sys

#: the variable that switches each module on (each module holds the same name as its ENV)
HOOKS = {"RL_AUTOTEST_COLLECT": "rl_autotest_collect", "RL_AUTOTEST_AA_NUDGE": "rl_autotest_nudge"}

for _variable, _module in HOOKS.items():
    if os.environ.get(_variable):
        importlib.import_module(_module).install()


def _run_the_next_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_rl_autotest_next_sitecustomize"] = module
    spec.loader.exec_module(module)


_run_the_next_sitecustomize()
