"""The results folder made fit to upload: env.json redacted, Ray sockets and over-budget logs and the middle of
the per-step trajectories left out, each named with its size and why; trackers and training logs untouched."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from autotest.redaction import forget_secrets
from autotest.report.markdown import left_out_lines
from autotest.run.upload_budget import UploadBudget, finalise_uploads

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # token-shaped, under a name that says nothing
PASSWORD = "correct-horse-battery-staple"  # plain text, under a secret name
BUDGET = UploadBudget(trajectory_steps=2, ray_logs_bytes=1000)


@pytest.fixture(autouse=True)
def registry():
    forget_secrets()
    yield
    forget_secrets()


def _folder(tmp_path: Path) -> Path:
    """A results folder as an xtuner run leaves it: env.json, a Ray session, 12 trajectory steps, the logs."""
    results = tmp_path / "results"
    exp = results / "work" / "20261206071500"
    (exp / "logs" / "exp_tracking").mkdir(parents=True)
    (exp / "logs" / "exp_tracking" / "tracker.jsonl").write_text('{"step": 1, "response/rewards/mean": 0.5}\n')
    (exp / "logs" / "env.json").write_text(json.dumps({"PATH": "/usr/bin", "SOME_SETTING": TOKEN,
                                                       "DB_PASSWORD": PASSWORD, "WORK_DIR": str(exp.parent)}))
    # the training log echoes both (xtuner logs its config): masked by value once env.json named them
    (results / "work" / "training_log_120607.txt").write_text(f"token={TOKEN}\npassword is {PASSWORD}\nstep 1\n")
    (results / "logs").mkdir()
    (results / "logs" / "stdout.log").write_text(f"connecting with {PASSWORD}\n")
    session = results / "work" / "ray_120607" / "session_2026-12-06_07-15-00_123456"
    (session / "sockets").mkdir(parents=True)
    (session / "logs").mkdir()
    for name, size in (("raylet.err", 100), ("gcs_server.out", 300), ("dashboard.log", 5000)):
        (session / "logs" / name).write_bytes(b"x" * size)
    (session.parent / "session_latest").symlink_to(session.name)
    here = os.getcwd()
    os.chdir(session / "sockets")  # a socket path is limited to 107 bytes: bind it by its short relative name
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("raylet")  # a real socket file, as Ray leaves one
    finally:
        os.chdir(here)
    for step in range(1, 13):
        rollout = exp / "train_rollout" / f"train_rollout_{step}.jsonl"
        rollout.parent.mkdir(exist_ok=True)
        rollout.write_text(f'{{"step": {step}, "response": "..."}}\n')
    return results


def test_no_secret_is_left_anywhere_in_the_folder(tmp_path):
    results = _folder(tmp_path)
    done = finalise_uploads(results, BUDGET)
    assert done.redacted == ("work/20261206071500/logs/env.json",)
    for path in (p for p in results.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        assert TOKEN.encode() not in data and PASSWORD.encode() not in data, path
    env = json.loads((results / "work" / "20261206071500" / "logs" / "env.json").read_text())
    assert env == {"PATH": "/usr/bin", "SOME_SETTING": "***", "DB_PASSWORD": "***",
                   "WORK_DIR": str(results / "work")}


def test_what_is_left_out_is_named_with_its_size_and_why(tmp_path):
    results = _folder(tmp_path)
    done = finalise_uploads(results, BUDGET)
    left = {x.path: x for x in done.left_out}
    ray = "work/ray_120607/"
    assert left[ray + "session_latest"].why.startswith("a link inside a Ray session")
    assert left[ray + "session_2026-12-06_07-15-00_123456/sockets/raylet"].why == "a socket: it cannot be uploaded"
    big = left[ray + "session_2026-12-06_07-15-00_123456/logs/dashboard.log"]
    assert (big.bytes, big.why) == (5000, "a Ray session log past the 1000 bytes budget of its session "
                                          "(smallest kept first)")
    rollouts = sorted(int(p.rsplit("_", 1)[1].split(".")[0]) for p in left if "train_rollout_" in p)
    assert rollouts == list(range(3, 11))  # steps 1-2 and 11-12 kept
    assert left["work/20261206071500/train_rollout/train_rollout_5.jsonl"].why == (
        "a per-step train_rollout trajectory: 12 steps written, the first and last 2 uploaded "
        "(steps up to 2 and from 11 kept)")
    assert len(left) == 3 + len(rollouts)
    # gone from the folder; the judge's files and the small Ray logs stay
    assert not any((results / p).exists() or (results / p).is_symlink() for p in left)
    for kept in ("work/20261206071500/logs/exp_tracking/tracker.jsonl", "work/training_log_120607.txt",
                 ray + "session_2026-12-06_07-15-00_123456/logs/raylet.err",
                 ray + "session_2026-12-06_07-15-00_123456/logs/gcs_server.out",
                 "work/20261206071500/train_rollout/train_rollout_12.jsonl"):
        assert (results / kept).is_file(), kept


def test_the_report_says_what_was_left_out(tmp_path):
    done = finalise_uploads(_folder(tmp_path), BUDGET)
    lines = left_out_lines(json.loads(json.dumps(done.to_dict())))
    text = "\n".join(lines)
    assert "## Left out of the upload" in text
    assert "- redacted: `work/20261206071500/logs/env.json` (secret values masked)" in text
    assert "- 8 file(s), " in text and "a per-step train_rollout trajectory" in text and "and 3 more" in text
    assert "- 1 file(s), 5000 bytes: a Ray session log past the" in text


def test_a_folder_with_nothing_to_leave_out_is_untouched(tmp_path):
    results = tmp_path / "results"
    (results / "work").mkdir(parents=True)
    (results / "work" / "eval_rollout_1.jsonl").write_text("{}\n")
    assert finalise_uploads(results, BUDGET).empty
    assert left_out_lines(None) == []


def test_a_half_written_env_json_is_redacted_as_text(tmp_path):
    results = tmp_path / "results"
    (results / "logs").mkdir(parents=True)
    (results / "logs" / "env.json").write_text(f'{{"HF_TOKEN": "{PASSWORD}", "X": "{TOKEN}", "Y": "tru')
    assert finalise_uploads(results, BUDGET).redacted == ("logs/env.json",)
    text = (results / "logs" / "env.json").read_text()
    assert PASSWORD not in text and TOKEN not in text and '"Y": "tru' in text
