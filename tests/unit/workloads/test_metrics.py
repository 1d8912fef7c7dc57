"""The mismatch formulas against a direct, loop-by-loop computation of REFERENCE.md's definitions."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.metrics import group_advantages, mismatch_metrics, summary_stats  # noqa: E402


def _direct(train: list[list[float]], rollout: list[list[float]], mask: list[list[int]]) -> dict[str, float]:
    """REFERENCE.md, spelled out: token means over response tokens, sequence means for ppl."""
    k3, kl, absd, n = 0.0, 0.0, 0.0, 0
    train_ppl, rollout_ppl, log_ppl_diff, ppl_ratio = [], [], [], []
    for t_row, r_row, m_row in zip(train, rollout, mask):
        seq_t = [t for t, m in zip(t_row, m_row) if m]
        seq_r = [r for r, m in zip(r_row, m_row) if m]
        for t, r in zip(seq_t, seq_r):
            d = t - r
            k3 += math.exp(d) - d - 1
            kl += r - t
            absd += abs(d)
            n += 1
        mean_t, mean_r = sum(seq_t) / len(seq_t), sum(seq_r) / len(seq_r)
        train_ppl.append(math.exp(-mean_t))
        rollout_ppl.append(math.exp(-mean_r))
        log_ppl_diff.append(mean_r - mean_t)
        ppl_ratio.append(math.exp(mean_r - mean_t))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {
        "mismatch/mismatch_k3_kl": k3 / n,
        "mismatch/mismatch_kl": kl / n,
        "mismatch/mismatch_logprob_abs_diff": absd / n,
        "mismatch/mismatch_training_ppl": mean(train_ppl),
        "mismatch/mismatch_rollout_ppl": mean(rollout_ppl),
        "mismatch/mismatch_log_ppl_diff": mean(log_ppl_diff),
        "mismatch/mismatch_ppl_ratio": mean(ppl_ratio),
    }


def test_mismatch_metrics_match_direct_computation() -> None:
    gen = torch.Generator().manual_seed(3)
    rollout = -torch.rand(5, 7, generator=gen, dtype=torch.float64) * 3
    train = rollout + torch.randn(5, 7, generator=gen, dtype=torch.float64) * 0.3
    mask = torch.ones(5, 7)
    mask[1, 4:] = 0
    mask[3, 1:] = 0
    train[1, 5] = float("nan")  # padding may hold garbage; it must not leak in
    got = mismatch_metrics(train, rollout, mask)
    want = _direct(train.tolist(), rollout.tolist(), mask.long().tolist())
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-15), key


def test_k3_keeps_precision_for_fp32_sized_differences() -> None:
    rollout = torch.full((2, 4), -1.5, dtype=torch.float32)
    train = rollout + 1e-7
    got = mismatch_metrics(train, rollout, torch.ones(2, 4))
    d = float(train[0, 0].double() - rollout[0, 0].double())
    assert got["mismatch/mismatch_k3_kl"] == pytest.approx(d * d / 2, rel=1e-6)
    assert got["mismatch/mismatch_kl"] == pytest.approx(-d, rel=1e-9)


def test_identical_logprobs_give_zero_mismatch() -> None:
    logp = -torch.rand(3, 5)
    got = mismatch_metrics(logp, logp.clone(), torch.ones(3, 5))
    assert got["mismatch/mismatch_k3_kl"] == 0.0
    assert got["mismatch/mismatch_ppl_ratio"] == 1.0
    assert got["mismatch/mismatch_training_ppl"] == got["mismatch/mismatch_rollout_ppl"]


def test_group_advantages_normalise_within_each_group() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = group_advantages(rewards, group_size=4)
    first = adv[:4]
    assert float(first.mean()) == pytest.approx(0.0, abs=1e-7)
    assert float(first.std()) == pytest.approx(1.0, rel=1e-5)
    assert torch.equal(adv[4:], torch.zeros(4))  # all-equal group: no signal


def test_summary_stats_uses_population_std() -> None:
    stats = summary_stats("response/response_len", torch.tensor([2.0, 4.0]))
    assert stats == {
        "response/response_len/mean": 3.0,
        "response/response_len/min": 2.0,
        "response/response_len/max": 4.0,
        "response/response_len/std": 1.0,
    }
