"""A real calibration of a noisy scripted trainer: the per-step length check cannot fire and is named useless."""

from __future__ import annotations

import pytest

from autotest.calibration.runs import baseline_files
from autotest.inputs.baseline import load_baseline
from tests.helpers import run_cli as cli
from tests.integration.calibration.test_runs import CASE, fake_framework

# 20 steps of a trainer whose response length rises by 60 under a seed spread of sd 20 (a per-step check's
# max-deviation threshold is then wider than anything the curve does) and whose reward rises
TRAIN = '''
import argparse, datetime, json, os, random
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--fault", default="")
a = p.parse_args()
rng = random.Random(a.seed)
exp = Path(os.environ["WORK_DIR"]) / datetime.datetime.now().strftime("%Y%m%d%H%M%S")
(exp / "logs" / "exp_tracking").mkdir(parents=True)
rows = [{"response/rewards/mean": 0.1 + 0.05 * step + rng.gauss(0, 0.01),
         "response/response_len/mean": 100 + 3 * step + rng.gauss(0, 20), "step": step} for step in range(1, 21)]
(exp / "logs" / "exp_tracking" / "tracker.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
'''

SPEC = """schema_version: 1
name: {name}
golden: {{table: {{}}}}
steps: {{expected: 20, exact: true}}
calibration: {{margin: 1.5, relative_floor: 0.01}}
checks:
  - {{metric: response/rewards/mean, method: absolute, operator: "<", threshold: placeholder, scope: percentile,
     percentile: 80}}
  - {{metric: response/response_len/mean, method: relative, operator: "<", threshold: placeholder,
     scope: percentile, percentile: 80}}
  - {{metric: response/response_len/mean, method: absolute, operator: "<", threshold: placeholder, scope: pooled}}
"""


@pytest.fixture
def noisy_case(tmp_path, monkeypatch):
    case = CASE.replace("expected: {{steps: 10}}", "expected: {{steps: 20}}").replace(
        "default: 4, calibration: [0, 1, 2, 3]", "default: 8, calibration: [0, 1, 2, 3, 4, 5, 6, 7]")
    return fake_framework(tmp_path, monkeypatch, "noisy-calib", TRAIN, case, SPEC)[:2]


def test_calibrate_names_the_useless_check_and_keeps_it_as_reference(noisy_case, tmp_path, capsys):
    case, baselines = noisy_case
    code = cli("calibrate", str(case.source), "--runs", "8", "--jobs", "2", "--baselines-dir", str(baselines),
               "--results-dir", str(tmp_path / "results"))
    out = capsys.readouterr().out
    assert code in (0, 1), out  # 1: the self-check false-alarmed (8 runs); the candidate is written either way
    length = "response/response_len/mean"
    useless = [line for line in out.splitlines() if line.startswith("useless: ")]
    assert len(useless) == 1 and useless[0].startswith(f"useless: {length}[percentile]: its minimum detectable "
                                                       "effect ±"), out
    assert "exceeds the metric's whole range" in useless[0] and "(golden over steps 1-20 [" in useless[0]
    _, candidate, report = baseline_files(case, baselines)
    severity = {c.check_id: c.severity for c in load_baseline(candidate).checks}
    assert severity == {"response/rewards/mean[percentile]": "gate", f"{length}[percentile]": "reference",
                        f"{length}[pooled]": "gate"}
    text = report.read_text()
    assert "## Checks that cannot fire" in text and f"- `{length}[percentile]`: its minimum detectable" in text
    assert f"| `{length}[percentile]` | relative < | reference |" in text
