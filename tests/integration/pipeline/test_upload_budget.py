"""A run that leaves what xtuner leaves in its WORK_DIR (env.json with the run's own secrets, a Ray session with a
socket and logs, a trajectory file per step): its uploaded results folder holds none of the secrets, and
results.json and report.md say what was left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.inputs.case import REPO_ROOT
from autotest.redaction import forget_secrets
from tests.helpers import DATA

WANDB = "wandb-run-secret-7c1f9e"  # set by the run itself: the harness never saw it
TOKEN = "hf_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"  # token-shaped, under a name that says nothing

LAUNCHER = f'''
import json, os, runpy, socket, sys
from pathlib import Path
work = Path(sys.argv[sys.argv.index("--work-dir") + 1])
try:
    runpy.run_path(r"{DATA / 'scripted_run.py'}", run_name="__main__")
except SystemExit:
    pass
os.environ["WANDB_API_KEY"] = "{WANDB}"
os.environ["ROLLOUT_ENDPOINT_ID"] = "{TOKEN}"
exp = sorted(p for p in work.iterdir() if p.name.isdigit())[-1]
(exp / "logs" / "env.json").write_text(json.dumps(dict(os.environ)))
print("wandb login", os.environ["WANDB_API_KEY"], os.environ["ROLLOUT_ENDPOINT_ID"], flush=True)
session = work / "ray_120607" / "session_2026-12-06_07-15-00_1"
(session / "logs").mkdir(parents=True)
(session / "sockets").mkdir()
(session / "logs" / "raylet.out").write_bytes(b"x" * (40 * 2**20))
os.chdir(session / "sockets")
with socket.socket(socket.AF_UNIX) as sock:
    sock.bind("raylet")
for step in range(1, 11):
    (exp / "train_rollout").mkdir(exist_ok=True)
    (exp / "train_rollout" / f"train_rollout_{{step}}.jsonl").write_text("{{}}\\n")
'''


@pytest.fixture
def registry():
    forget_secrets()
    yield
    forget_secrets()


def test_the_uploaded_folder_holds_no_secret_and_says_what_it_left_out(tmp_path: Path, capsys, registry) -> None:
    launcher = tmp_path / "xtuner_like.py"
    launcher.write_text(LAUNCHER)
    case = tmp_path / "leaves-a-lot.yaml"
    case.write_text(f"""name: leaves-a-lot
description: leaves what xtuner leaves in its WORK_DIR
markers: []
goal: upload nothing secret and nothing huge
minimal_scale: one process
platform: {{gpus: 0, framework: null}}
launch:
  command: ["{{python}}", "{launcher}", --work-dir, "{{work_dir}}", --seed, "{{seed}}"]
  timeout_s: 60
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 10, exact_steps: true}}
baseline: {REPO_ROOT}/tests/data/baselines/scripted.yaml
seed: {{default: 0}}
""", encoding="utf-8")
    results = tmp_path / "results"
    code = main(["run", str(case), "--yes", "--no-history", "--results-dir", str(results)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    files = [p for p in results.rglob("*") if p.is_file() and not p.is_symlink()]
    leaked = [str(p) for p in files for secret in (WANDB, TOKEN) if secret.encode() in p.read_bytes()]
    assert leaked == []
    (record,) = [p for p in files if p.name == "results.json"]
    left = json.loads(record.read_text())["context"]["left_out"]
    assert [p.split("/", 2)[2] for p in left["redacted"]] == ["logs/env.json"]  # work/<exp>/logs/env.json
    why = {Path(x["path"]).name: x["why"] for x in left["left_out"]}
    assert why["raylet"] == "a socket: it cannot be uploaded"
    assert why["raylet.out"].startswith("a Ray session log past the 32 MiB budget")
    assert sorted(n for n in why if n.startswith("train_rollout_")) == [f"train_rollout_{s}.jsonl" for s in (4, 5, 6, 7)]
    report = (record.parent / "report.md").read_text()
    assert "## Left out of the upload" in report and "a socket: it cannot be uploaded" in report
    # the judge's own files stay
    assert (record.parent / "tracker.jsonl").is_file() and list(results.rglob("work/*/logs/exp_tracking/tracker.jsonl"))
