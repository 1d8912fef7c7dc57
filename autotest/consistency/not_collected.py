"""When a framework has no collection hook wired: the steps to collect by hand, written beside the wrapper.

The consistency job cannot collect dumps for a case without ``consistency.diagnostic_args`` (xtuner
today): its launch has no way to receive the diagnostic config. That is not a failure of the run under
test, so the job ends "not collected" (exit 3, neutral in the nightly) and leaves
``consistency/how_to_collect.md``: the hook wiring, the re-run with collection on, the analysis command
and how to make the next breach collect by itself. Paths are relative to the results folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from autotest.consistency.hook import ENV

MANUAL_FILE = "how_to_collect.md"


def _rel(path: Path, results_dir: Path) -> str:
    return os.path.relpath(path, results_dir)


def write_manual_steps(results_dir: Path, out: Path, *, case_name: str, case_file: Path, framework: str,
                       wrapper: Path, diagnostic_config: Path, paths: dict[str, Path]) -> Path:
    """Write ``out/how_to_collect.md`` and return its path."""
    def r(path: Path) -> str:  # every path below is shown relative to the results folder
        return _rel(path, results_dir)

    text = f"""# Consistency dump: collection not available for {framework}

The accuracy run of `{case_name}` breached a train-inference consistency check, and the dump job
screened it, but it could not collect MSProbe dumps: the case file `{case_file}` has no
`consistency.diagnostic_args`, so {framework}'s launch has no diagnostic hook wired. This is not a
verdict on the run (that is in `report.md`). Paths below are relative to the results folder: run the
commands from there.

## Collect by hand

1. Wire the default-off hook in {framework} (docs/consistency-analyze.md, "Collecting in a framework:
   the default-off hook"). It is a no-op unless `{ENV}` is set:

   ```python
   from autotest.consistency.hook import consistency_forward

   # rollout worker, per batch, around the engine's prefill / log-prob forward:
   with consistency_forward(model, side="rollout", step=rollout_step,
                            requests=[(r.request_id, r.input_ids) for r in batch]):
       outputs = model(input_ids, ...)
   # train worker, around the old-log-prob recompute of each micro-batch:
   with consistency_forward(self.model, side="train", step=train_step,
                            requests=list(zip(micro_batch.request_ids, micro_batch.input_ids))):
       old_logprobs = self.compute_logprobs(micro_batch)
   ```

   For an unmodified process: a `sitecustomize.py` on `PYTHONPATH` calling
   `autotest.consistency.hook.install_from_env()`, with `"auto": {{"side": "rollout"}}` in the config.

2. Re-run the case with collection on, on a node that can run it (the wrapper is the case's own
   launch with the run's environment):

   ```bash
   {ENV}="$PWD/{r(diagnostic_config)}" bash {r(wrapper)}
   ```

3. Analyse the dumps:

   ```bash
   rl-autotest consistency analyze --train-dump {r(paths["actor_dump"])} \\
       --rollout-dump {r(paths["rollout_dump"])} \\
       --train-correlation {r(paths["actor_log"])} \\
       --rollout-correlation {r(paths["rollout_log"])} --out {r(out)}
   ```

4. So that the next breach collects by itself: once {framework}'s launch passes a diagnostic config to
   its processes, set `consistency.diagnostic_args` in the case (it must contain
   `{{diagnostic_config}}`), e.g. an option of the launch script that exports `{ENV}`.
"""
    path = out / MANUAL_FILE
    path.write_text(text, encoding="utf-8")
    return path
