from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from tests.helpers import DATA, ROOT

BAD = DATA / "bad_baselines"


@pytest.mark.parametrize("line", (BAD / "EXPECTED.txt").read_text(encoding="utf-8").splitlines())
def test_bad_baseline_corpus(line, monkeypatch):
    monkeypatch.delenv("RL_AUTOTEST_TEST_UNSET_ROOT", raising=False)
    name, expected = line.split("\t", 1)
    with pytest.raises(UsageError) as info:
        load_baseline(BAD / name)
    assert str(info.value) == f"{BAD / name}{expected[len(name):]}"


def test_seed_mopd_baseline_encodes_the_table():
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    assert b.golden_table["eval/gsm8k/acc"][0] == 0.4339
    assert b.golden_table["distillation/reduced_distillation_kl"][25] == 0.3118
    assert b.calibrated_range == (0, 25)
    thresholds = {c.metric: (c.method, c.threshold, c.severity) for c in b.checks}
    assert thresholds == {
        "distillation/reduced_distillation_kl": ("absolute", 0.03, "gate"),
        "distillation/reduced_distillation_abs_loss": ("absolute", 0.03, "gate"),
        "response/rewards/mean": ("absolute", 0.08, "gate"),
        "eval/gsm8k/acc": ("absolute", 0.03, "gate"),
        "eval/geo3k/acc": ("absolute", 0.04, "gate"),
        "response/response_len/mean": ("relative", 0.18, "reference"),  # no golden values yet
        "time/step": ("relative", 0.10, "reference"),
    }
    # k1 mode: opd_reverse_kl duplicates reduced_distillation_kl, so it is not checked twice
    assert not any("opd_reverse_kl" in c.metric for c in b.checks)


def test_seed_grpo_baseline_expands_share_root(monkeypatch, tmp_path):
    monkeypatch.setenv("CI_SHARE_BASELINE", str(tmp_path))
    b = load_baseline(ROOT / "baselines" / "grpo-gsm8k-qwen3-8b-lmdeploy.yaml")
    assert b.golden_tracker == tmp_path / "qwen3-rl-lmdeploy" / "tracker.jsonl"
    assert (b.steps.expected, b.steps.exact, b.wall_time_max_s) == (45, True, 2400.0)
    by_metric = {c.metric: c for c in b.checks}
    assert by_metric["response/rewards/mean"].percentile == 80
    assert by_metric["eval/accuracy"].scope == "final"
    assert (by_metric["mismatch/mismatch_k3_kl"].method, by_metric["mismatch/mismatch_k3_kl"].operator) == ("value", "<")


def test_quoted_non_finite_golden_values_are_read(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text('golden: {table: {m: {1: ".nan", 2: "-inf", 3: .inf}}}\n'
                    'checks: [{metric: m, method: absolute, operator: "<", threshold: 0.1}]\n')
    assert str(dict(load_baseline(path).golden_table["m"])) == "{1: nan, 2: -inf, 3: inf}"
