"""When the consistency job collected nothing: the steps to collect by hand, written beside the wrapper.

The job attaches collection through the environment (:mod:`.attach_run`) to a case without
``consistency.diagnostic_args`` (xtuner today). When that collects nothing (the case cannot run on this
runner, or a side's attach point is missing from the installed framework) it is not a failure of the run
under test: the job ends "not collected" (exit 3, neutral in the nightly) and leaves
``consistency/how_to_collect.md``: why, the re-run with collection on, and the analysis command.
Paths are relative to the results folder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from autotest.consistency.attach_run import ATTACH_DIR, points_table
from autotest.consistency.hook import ENV as HOOK_ENV
from autotest.attach.rl_autotest_collect import ENV

MANUAL_FILE = "how_to_collect.md"


def _rel(path: Path, results_dir: Path) -> str:
    return os.path.relpath(path, results_dir)


def write_manual_steps(results_dir: Path, out: Path, *, case_name: str, case_file: Path, framework: str,
                       wrapper: Path, diagnostic_config: Path, paths: dict[str, Path],
                       lines: Sequence[str] = ()) -> Path:
    """Write ``out/how_to_collect.md`` and return its path."""
    def r(path: Path) -> str:  # every path below is shown relative to the results folder
        return _rel(path, results_dir)

    why = "\n".join(f"- {line}" for line in lines) or "- nothing was collected"
    text = f"""# Consistency dump: not collected for {framework}

The accuracy run of `{case_name}` (`{case_file}`) breached a train-inference consistency check and the dump
job screened it, but it collected no MSProbe dumps on both sides. This is not a verdict on the run (that is
in `report.md`). Paths below are relative to the results folder: run the commands from there.

{why}

## Collect by hand

1. On a node that can run the case, re-run it with collection attached. Nothing is passed to the launch
   script: the wrapper exports `{ENV}` (the diagnostic config) and puts the collection folder first on
   `PYTHONPATH` (its `sitecustomize.py` loads `rl_autotest_collect`, a standalone file: the node's Python
   needs no harness, only `mindstudio-probe`). Environment set before `ray start` reaches Ray workers and
   the servers they start. Copy `{ATTACH_DIR}` from the harness if this runner's path differs:

   ```bash
   {ENV}="$PWD/{r(diagnostic_config)}" PYTHONPATH="/path/to/attach:$PYTHONPATH" bash {r(wrapper)}
   ```

   It attaches at these points (a point missing from the installed version is reported, never skipped):

{points_table()}

2. Analyse the dumps:

   ```bash
   rl-autotest consistency analyze --train-dump {r(paths["actor_dump"])} \\
       --rollout-dump {r(paths["rollout_dump"])} \\
       --train-correlation {r(paths["actor_log"])} \\
       --rollout-correlation {r(paths["rollout_log"])} --out {r(out)}
   ```

3. A framework the table does not cover: wrap its forwards with
   `autotest.consistency.hook.consistency_forward` (on when `{HOOK_ENV}` is set) and give its launch an
   option that passes the config (`consistency.diagnostic_args`, containing `{{diagnostic_config}}`).
"""
    path = out / MANUAL_FILE
    path.write_text(text, encoding="utf-8")
    return path
