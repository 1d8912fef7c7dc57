"""The tiny GRPO workload end to end: real training runs, in-process and as subprocesses.

Small runs (few steps, 8 prompts x 4 samples) keep this file fast; one ``slow`` test runs
the real 45-step default and checks that it learns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import signal
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.grpo import GRPOConfig, main, run  # noqa: E402
from autotest.workloads.tracker import TRACKER_RELPATH  # noqa: E402
from tests import waits  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SMALL = GRPOConfig(steps=3, eval_every=2, prompts_per_step=8, samples_per_prompt=4)
SMALL_ARGS = ["--steps", "3", "--eval-every", "2", "--prompts-per-step", "8", "--samples-per-prompt", "4"]
K3 = "mismatch/mismatch_k3_kl"
REWARDS = "response/rewards/mean"
SUMMARY_KEYS = {
    "time/step", "time/generate", "time/reward", "time/train", "time/sync", "memory/rss_mb", "memory/peak_rss_mb",
    "response/rewards/mean", "response/rewards/min", "response/rewards/max",
    "response/response_len/mean", "response/response_len/min", "response/response_len/max",
    "response/response_len/std", "response/advantages/mean", "response/advantages/std",
    "mismatch/mismatch_k3_kl", "mismatch/mismatch_kl", "mismatch/mismatch_logprob_abs_diff",
    "mismatch/mismatch_training_ppl", "mismatch/mismatch_rollout_ppl", "mismatch/mismatch_log_ppl_diff",
    "mismatch/mismatch_ppl_ratio", "entropy/mean", "step",
}  # fmt: skip


def _tracker(exp_dir: Path) -> Path:
    return exp_dir / TRACKER_RELPATH


def _rows(exp_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _tracker(exp_dir).read_text().splitlines()]


def _summaries(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["step"]: r for r in rows if REWARDS in r}


def _newest_exp(work_dir: Path) -> Path:
    return sorted(p for p in work_dir.iterdir() if p.is_dir())[-1]


def _no_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without what the machine measures (time and memory): the rest is bitwise per seed."""
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "memory/"))} for r in rows]


def _run(tmp_path: Path, name: str, **changes: Any) -> list[dict[str, Any]]:
    config = dataclasses.replace(SMALL, **changes)
    from autotest.workloads.faults import make_fault

    config = make_fault(config.fault, config.seed).configure(config)
    with contextlib.redirect_stdout(io.StringIO()):
        return _rows(run(config, tmp_path / name))


def _launch(work_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(work_dir), *args]
    return waits.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, limit_s=timeout)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A small healthy run (5 steps) the fault tests compare with."""
    return _run(tmp_path_factory.mktemp("healthy"), "w", steps=5)


def test_tracker_layout_row_kinds_and_config(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, seed=3)
    with contextlib.redirect_stdout(io.StringIO()):
        exp = run(config, tmp_path / "work")
    assert exp.parent == tmp_path / "work" and len(exp.name) == 14 and exp.name.isdigit()
    rows = _rows(exp)
    assert set(rows[0]) == {"eval/accuracy", "eval/greedy_accuracy", "step"} and rows[0]["step"] == 0
    kinds = []
    for row in rows[1:]:
        if any(k.startswith("train_metrics/worker_0/") for k in row):
            assert set(row) == {f"train_metrics/worker_0/{k}" for k in ("loss", "pg_clipfrac", "grad_norm", "lr", "skipped")} | {"step"}
            kinds.append(("mb", row["step"]))
        else:
            assert SUMMARY_KEYS <= set(row)
            assert ("eval/accuracy" in row) == (row["step"] in (2, 3)), row["step"]  # every 2nd and the last
            kinds.append(("summary", row["step"]))
    # per step: its mini-batch rows (same step), then its summary row
    assert kinds == [(kind, s) for s in (1, 2, 3) for kind in ["mb"] * config.mini_batches + ["summary"]]
    saved = json.loads((exp / "config.json").read_text())
    assert saved["recompute_logprobs"] is True
    assert (saved["seed"], saved["fault"], saved["rollout_dtype"], saved["steps"]) == (3, "", "fp32", 3)
    assert saved["lr"] == config.lr and saved["model"]["hidden_size"] == 64
    assert saved["eval_set_size"] == {"eval/accuracy": 9 * config.eval_samples}  # the binomial floor's n


def test_sampled_eval_never_moves_training_metrics(tmp_path: Path) -> None:
    """pass@1 draws from a generator of its own: the eval's size changes eval metrics only."""
    trained = {}
    for samples in (1, 8):
        with contextlib.redirect_stdout(io.StringIO()):
            exp = run(dataclasses.replace(SMALL, seed=2, eval_samples=samples), tmp_path / str(samples))
        # memory is the process's (a larger eval holds more), not the training's
        trained[samples] = [{k: v for k, v in row.items() if not k.startswith(("eval/", "time/", "memory/"))}
                            for row in _rows(exp)]
    assert trained[1] == trained[8]


@pytest.mark.slow  # three real tiny-grpo runs (25-45 s on 2 cores)
def test_same_seed_is_bitwise_identical_and_seeds_differ(tmp_path: Path) -> None:
    runs = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        proc = _launch(tmp_path / name, *SMALL_ARGS, "--seed", seed)
        assert proc.returncode == 0, proc.stderr
        runs[name] = _no_time(_rows(_newest_exp(tmp_path / name)))
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]
    assert _summaries(runs["a"])[1][K3] != _summaries(runs["c"])[1][K3]


def test_healthy_fp32_rollout_matches_the_trainer(healthy: list[dict[str, Any]]) -> None:
    for step, row in _summaries(healthy).items():
        assert 0 <= row[K3] < 1e-11, (step, row[K3])
        assert abs(row["mismatch/mismatch_ppl_ratio"] - 1) < 1e-5
        assert abs(row["mismatch/mismatch_training_ppl"] - row["mismatch/mismatch_rollout_ppl"]) < 1e-4


def test_bf16_rollout_is_small_healthy_noise(tmp_path: Path) -> None:
    summaries = _summaries(_run(tmp_path, "w", fault="bf16-rollout"))
    for step, row in summaries.items():
        assert 1e-8 < row[K3] < 1e-4, (step, row[K3])


@pytest.mark.parametrize("fault", ["perturbed-sync", "rollout-impl:model.layers.1.input_layernorm"])
def test_consistency_faults_breach_k3_from_step_1(tmp_path: Path, fault: str) -> None:
    summaries = _summaries(_run(tmp_path, "w", fault=fault, steps=3))
    assert all(row[K3] >= 1e-4 for row in summaries.values()), {s: r[K3] for s, r in summaries.items()}


def test_unsynced_layer_drifts_after_the_initial_sync(tmp_path: Path) -> None:
    summaries = _summaries(_run(tmp_path, "w", fault="unsynced-layer", steps=12))
    k3 = [summaries[s][K3] for s in range(1, 13)]
    assert k3[0] < 1e-11  # the initial sync is complete: step 1 is exact
    assert all(value > 1e-6 for value in k3[1:])  # stale from step 2 on
    assert k3[-1] >= 1e-4 and k3[-1] > 3 * k3[1], k3  # and growing


def test_rollout_impl_mlp_changes_the_rollout_logprobs(tmp_path: Path, healthy: list[dict[str, Any]]) -> None:
    summaries = _summaries(_run(tmp_path, "w", fault="rollout-impl", steps=5))
    # small at init (MLP outputs are tiny), yet far above fp32 noise from the first step
    assert all(row[K3] > 1e-6 for row in summaries.values())


def test_judge_bug_flips_rewards_on_identical_rollouts(tmp_path: Path, healthy: list[dict[str, Any]]) -> None:
    bad = _summaries(_run(tmp_path, "w", fault="judge-bug"))[1]
    good = _summaries(healthy)[1]
    assert bad[REWARDS] == pytest.approx(1 - good[REWARDS])
    assert bad["response/response_len/mean"] == good["response/response_len/mean"]
    assert bad["entropy/mean"] == good["entropy/mean"]


def test_advantage_sign_negates_the_policy_gradient(tmp_path: Path) -> None:
    # without the entropy bonus the first mini-batch loss is exactly -mean(advantage) (ratio 1)
    losses = {}
    for fault in ("", "advantage-sign"):
        rows = _run(tmp_path, fault or "healthy", fault=fault, steps=1, entropy_coef=0.0)
        losses[fault] = [r["train_metrics/worker_0/loss"] for r in rows if "train_metrics/worker_0/loss" in r]
        assert _summaries(rows)[1][REWARDS] > 0  # a signal to negate
    assert losses[""][0] != 0
    assert losses["advantage-sign"][0] == pytest.approx(-losses[""][0], rel=1e-5)


def test_lr_x10_and_changed_init_change_the_run(tmp_path: Path, healthy: list[dict[str, Any]]) -> None:
    lr_rows = _run(tmp_path, "lr", fault="lr-x10", steps=1)
    lrs = {r["train_metrics/worker_0/lr"] for r in lr_rows if "train_metrics/worker_0/lr" in r}
    assert len(lrs) == 1 and lrs.pop() == pytest.approx(SMALL.lr * 10)
    init = _summaries(_run(tmp_path, "init", fault="changed-init", steps=1))[1]
    good = _summaries(healthy)[1]
    assert init["entropy/mean"] < good["entropy/mean"] - 0.3  # a peakier model from step 1


def test_slow_step_adds_time(tmp_path: Path) -> None:
    summaries = _summaries(_run(tmp_path, "w", fault="slow-step:0.3", steps=2))
    assert all(row["time/step"] >= 0.3 for row in summaries.values())


def test_nan_at_writes_nan_and_skips_updates(tmp_path: Path) -> None:
    rows = _run(tmp_path, "w", fault="nan-at:2", steps=3)
    summaries = _summaries(rows)
    assert math.isfinite(summaries[1][K3])
    assert math.isnan(summaries[2][K3]) and math.isnan(summaries[3][K3])
    assert math.isfinite(summaries[3][REWARDS])
    skipped = [r["train_metrics/worker_0/skipped"] for r in rows if "train_metrics/worker_0/skipped" in r]
    assert skipped == [0.0] * SMALL.mini_batches + [1.0] * 2 * SMALL.mini_batches
    assert "NaN" in _tracker(_newest_exp(tmp_path / "w")).read_text()


def test_crash_exits_non_zero_after_the_last_good_step(tmp_path: Path) -> None:
    proc = _launch(tmp_path, *SMALL_ARGS, "--fault", "crash-at:2")
    assert proc.returncode == 1
    assert "RuntimeError: injected fault crash-at:2" in proc.stderr
    assert sorted(_summaries(_rows(_newest_exp(tmp_path)))) == [1]


def test_truncated_tracker_exits_zero_with_a_half_line(tmp_path: Path) -> None:
    proc = _launch(tmp_path, *SMALL_ARGS, "--fault", "truncated-tracker:2")
    assert proc.returncode == 0, proc.stderr
    text = _tracker(_newest_exp(tmp_path)).read_text()
    lines = text.split("\n")
    assert not text.endswith("\n") and lines[-1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1])
    assert [json.loads(line)["step"] for line in lines[:-1]][-1] == 1


def test_hang_really_hangs_until_killed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(tmp_path), *SMALL_ARGS]
    err = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(  # noqa: S603
        [*cmd, "--fault", "hang-at:2"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
    )
    try:
        waits.until(lambda: "hang-at:2" in (tmp_path / "stderr.txt").read_text(), 90, proc=proc,
                    what="never reached the hang")
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        waits.wait(proc, 30)
        err.close()
    assert proc.returncode == -signal.SIGKILL
    assert sorted(_summaries(_rows(_newest_exp(tmp_path)))) == [1]


def test_work_dir_env_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WORK_DIR", str(tmp_path / "env"))
    assert main(["--steps", "1", "--prompts-per-step", "2", "--samples-per-prompt", "2"]) == 0
    assert "[tiny-grpo] step 1/1" in capsys.readouterr().out
    assert sorted(_summaries(_rows(_newest_exp(tmp_path / "env")))) == [1]


class _RecordingObserver:
    """Records every observed forward and counts the model forwards inside each context."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.calls: list[dict[str, Any]] = []
        self.logprobs: dict[str, dict[str, Any]] = {}
        self.closed = 0

    @contextlib.contextmanager
    def forward(self, side: str, step: int, phase: str, request_ids: list[str], token_ids: list[list[int]],
                weight_version: int, model: torch.nn.Module, held_weight_version: int | None = None):  # noqa: ANN201
        call = {"side": side, "step": step, "phase": phase, "request_ids": request_ids, "token_ids": token_ids,
                "weight_version": weight_version, "held_weight_version": held_weight_version,
                "dtype": next(model.parameters()).dtype, "forwards": 0}
        handle = model.register_forward_hook(lambda *_: call.__setitem__("forwards", call["forwards"] + 1))
        try:
            yield
        finally:
            handle.remove()
            self.calls.append(call)

    def record_logprobs(self, kind: str, step: int, samples: list[int], request_ids: list[str],
                        positions: list[list[int]], token_ids: list[list[int]], logprobs: list[list[float]],
                        dtype: str | None = None, **kv_path: list[list[int]]) -> None:
        self.logprobs[kind] = {**kv_path, "dtype": dtype, "step": step, "samples": samples, "request_ids": request_ids, "positions": positions,
                               "token_ids": token_ids, "logprobs": logprobs}

    def close(self) -> None:
        self.closed += 1


def test_diagnostic_hook_wraps_one_forward_per_sample_on_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    observers: list[_RecordingObserver] = []
    fake = types.ModuleType("autotest.consistency.collect")
    fake.make_observer = lambda config: observers.append(_RecordingObserver(config)) or observers[-1]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autotest.consistency.collect", fake)
    diag = tmp_path / "diag.json"
    diag.write_text(json.dumps({"window_step": 2, "prompts_per_step": 1, "samples_per_prompt": 3,
                                "micro_batch_size": 1, "dump_path": "elsewhere"}))
    assert main(["--work-dir", str(tmp_path / "w"), "--diagnostic-config", str(diag), "--rollout-dtype", "bf16"]) == 0
    (observer,) = observers
    assert observer.config["dump_path"] == "elsewhere" and observer.closed == 1
    assert all(c["forwards"] == 1 and c["step"] == 2 and c["weight_version"] == 1 for c in observer.calls)
    assert {c["held_weight_version"] for c in observer.calls} == {1}  # each side's own version: in sync
    by_side = {s: [c for c in observer.calls if c["side"] == s] for s in ("rollout", "actor")}
    assert [c["phase"] for c in by_side["rollout"]] == ["prefill"] * 3
    assert [c["phase"] for c in by_side["actor"]] == ["recompute_logprob"] * 3
    assert {c["dtype"] for c in by_side["rollout"]} == {torch.bfloat16}
    assert {c["dtype"] for c in by_side["actor"]} == {torch.float32}
    pair = lambda side: sorted((c["request_ids"][0], tuple(c["token_ids"][0])) for c in by_side[side])  # noqa: E731
    assert pair("rollout") == pair("actor")
    assert [rid for rid, _ in pair("actor")] == ["step2-p0-s0", "step2-p0-s1", "step2-p0-s2"]
    # the three-way comparison's inputs: the same tokens as the sampler, the rollout prefill and the trainer saw them
    assert sorted(observer.logprobs) == ["recomputed", "recorded", "trainer"]
    seen = {k: (v["step"], v["request_ids"], v["positions"], v["token_ids"]) for k, v in observer.logprobs.items()}
    assert len(set(map(repr, seen.values()))) == 1 and seen["recorded"][1] == [rid for rid, _ in pair("actor")]
    for kind in ("recorded", "recomputed", "trainer"):
        values = observer.logprobs[kind]["logprobs"]
        assert [len(v) for v in values] == [len(p) for p in observer.logprobs[kind]["positions"]]
        assert all(v <= 0 for row in values for v in row)
    assert [observer.logprobs[k]["dtype"] for k in ("recorded", "recomputed", "trainer")] == ["bf16", "bf16", "fp32"]
    rows = _rows(_newest_exp(tmp_path / "w"))
    assert sorted(_summaries(rows)) == [1, 2]  # stops right after the window step
    saved = json.loads((_newest_exp(tmp_path / "w") / "config.json").read_text())
    assert (saved["window_step"], saved["prompts_per_step"], saved["micro_batch_size"]) == (2, 1, 1)
    assert "step 2/2" in capsys.readouterr().out


def test_a_skipped_sync_leaves_the_rollout_holding_the_version_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sync-skip-alternate drops the sync after step 1: at step 2 the rollout labels its batch version 1 but holds
    version 0, while the actor holds 1, so pairing names the stale sync with N = 1."""
    from autotest.consistency.correlation import ForwardRecord, token_ranges_of
    from autotest.consistency.pairing import stale_by

    observers: list[_RecordingObserver] = []
    fake = types.ModuleType("autotest.consistency.collect")
    fake.make_observer = lambda config: observers.append(_RecordingObserver(config)) or observers[-1]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autotest.consistency.collect", fake)
    diag = tmp_path / "diag.json"
    diag.write_text(json.dumps({"window_step": 2, "prompts_per_step": 1, "samples_per_prompt": 2,
                                "micro_batch_size": 1}))
    assert main(["--work-dir", str(tmp_path / "w"), "--diagnostic-config", str(diag),
                 "--fault", "sync-skip-alternate"]) == 0
    (observer,) = observers
    held = {side: {c["held_weight_version"] for c in observer.calls if c["side"] == side} for side in ("rollout", "actor")}
    assert held == {"rollout": {0}, "actor": {1}}
    assert {c["weight_version"] for c in observer.calls} == {1}  # the label alone says nothing is wrong

    def record(call: dict[str, Any]) -> ForwardRecord:
        ids = tuple(tuple(t) for t in call["token_ids"])
        return ForwardRecord(call["side"], 1, None, 2, call["phase"], 0, call["weight_version"], 2, "statistics",
                             "", "", tuple(call["request_ids"]), ids, token_ranges_of(ids), "", 0,
                             held_weight_version=call["held_weight_version"])

    rollout, actor = (record(next(c for c in observer.calls if c["side"] == s)) for s in ("rollout", "actor"))
    assert stale_by(rollout, actor) == 1


def test_without_diagnostic_config_the_collector_is_never_touched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("autotest.consistency.collect")

    def refuse(config: dict[str, Any]) -> None:
        raise AssertionError("observer built without --diagnostic-config")

    fake.make_observer = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autotest.consistency.collect", fake)
    _run(tmp_path, "w", steps=1)


def _ray_processes(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if marker in cmdline:
                    found.append(f"{proc.name}: {cmdline[:120]}")
    return found


@pytest.mark.slow
def test_ray_mode_matches_local_mode_and_stops_its_cluster(tmp_path: Path) -> None:
    args = ["--steps", "2", "--eval-every", "2", "--prompts-per-step", "4", "--samples-per-prompt", "4"]
    ray_proc = _launch(tmp_path / "ray", *args, "--ray", timeout=300)
    assert ray_proc.returncode == 0, ray_proc.stderr[-3000:]
    local = _launch(tmp_path / "local", *args)
    assert local.returncode == 0, local.stderr
    assert _no_time(_rows(_newest_exp(tmp_path / "ray"))) == _no_time(_rows(_newest_exp(tmp_path / "local")))
    temp_dir = next(line.split(" in ")[-1] for line in ray_proc.stdout.splitlines() if "started a local Ray" in line)
    assert not Path(temp_dir).exists()
    assert _ray_processes(temp_dir) == []


@pytest.mark.slow
def test_default_run_learns(tmp_path: Path) -> None:
    proc = _launch(tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(_newest_exp(tmp_path))
    summaries = _summaries(rows)
    assert sorted(summaries) == list(range(1, 46))
    assert [r["step"] for r in rows if "eval/accuracy" in r] == [0, 15, 30, 45]
    assert summaries[1][REWARDS] < 0.1
    assert summaries[45][REWARDS] > 0.8
    assert summaries[45]["eval/accuracy"] >= 0.8
    assert max(r[K3] for r in summaries.values()) < 1e-11
