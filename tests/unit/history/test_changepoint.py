"""Change points with a permutation-test significance, on synthetic series."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from autotest.history.changepoint import (
    DriftParams,
    candidates,
    change_points,
    latest_change,
    permutation_p_value,
    robust_sigma,
    split_statistics,
    replicate_spread_change,
    spread_change,
)
from tests import waits


def _series(n: int = 40, shift_at: int | None = None, shift: float = 0.5, sd: float = 0.1, seed: int = 0):
    x = 0.3 + np.random.default_rng(seed).normal(0, sd, n)
    if shift_at is not None:
        x[shift_at:] += shift
    return x


@pytest.mark.parametrize("seed", range(5))
def test_no_shift_gives_no_change(seed) -> None:
    assert change_points(_series(seed=seed)) == []
    assert latest_change(_series(seed=seed)) is None


@pytest.mark.parametrize("seed", range(5))
def test_a_half_threshold_shift_is_found_where_it_starts(seed) -> None:
    change = latest_change(_series(shift_at=24, seed=seed))
    assert change is not None and abs(change.index - 24) <= 1  # a noisy run at the edge may move it by one
    assert change.shift == pytest.approx(0.5, abs=0.1) and change.p_value <= 0.01
    assert (change.runs_before, change.runs_after) == (change.index, 40 - change.index)


def test_a_shift_below_min_shift_is_not_reported_however_significant() -> None:
    x = _series(shift_at=20, shift=0.1, sd=0.001)
    assert change_points(x) == []
    assert latest_change(x, DriftParams(min_shift=0.05)).index == 20


def test_a_change_older_than_the_lookback_is_no_longer_reported() -> None:
    x = _series(shift_at=10)
    assert [c.index for c in change_points(x)] == [10]
    assert latest_change(x) is None
    assert latest_change(x, DriftParams(lookback_runs=30)).index == 10


def test_the_latest_of_two_changes_is_reported() -> None:
    x = _series(n=60, shift_at=20)
    x[45:] -= 1.0
    assert [c.index for c in change_points(x)] == [20, 45]
    assert latest_change(x).shift == pytest.approx(-1.0, abs=0.1)


def test_short_and_constant_series_give_nothing() -> None:
    assert latest_change([0.3] * 40) is None
    assert latest_change([0.3, 0.9, 0.9]) is None
    assert latest_change([0.3] * 30 + [float("nan")] + [0.3] * 9) is None


def test_split_statistic_and_p_value() -> None:
    step = np.array([0.0] * 10 + [1.0] * 10)
    assert split_statistics(step[None, :], 3)[0] == pytest.approx(5.0)  # 10*10/20 * 1^2
    rng = np.random.default_rng(0)
    assert permutation_p_value(step, 3, 999, rng) <= 0.002
    assert permutation_p_value(np.zeros(20), 3, 99, rng) == 1.0
    assert robust_sigma(np.array([0.0, 1.0] * 10)) == pytest.approx(1 / (0.6745 * np.sqrt(2)))


def test_nonsense_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="min_runs_after >= 2"):
        DriftParams(min_runs_after=1)
    with pytest.raises(ValueError, match="at least 19 permutations"):
        DriftParams(permutations=5)


def test_candidates_are_ruptures_binary_segmentation_without_importing_it() -> None:
    ruptures = pytest.importorskip("ruptures", reason="the parity check needs ruptures (pip install ruptures)")
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(6, 61))
        values = rng.normal(0, 1, n) + np.where(np.arange(n) >= rng.integers(0, n), rng.normal(0, 3), 0.0)
        if trial % 5 == 0:
            values = np.round(values)  # ties between equally good splits
        min_size = int(rng.integers(2, max(3, n // 2) + 1))
        if n < 2 * min_size:
            continue
        scale = max(robust_sigma(values) ** 2, 1e-12 * max(float(np.var(values)), 1e-300))
        expected = ruptures.Binseg(model="l2", min_size=min_size, jump=1).fit(values).predict(
            pen=2 * scale * math.log(n))
        assert candidates(values, min_size) == [b for b in expected if b < n], (trial, list(values), min_size)


def test_finding_a_change_imports_neither_ruptures_nor_scipy() -> None:
    """Drift runs after every recorded verdict: it must not pay SciPy's import (1.2 s) each time."""
    code = ("import sys; from autotest.history.changepoint import change_points; "
            "assert change_points([0.3] * 20 + [0.9] * 20 + [0.31, 0.29] * 5); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'ruptures', 'scipy'}))")
    out = waits.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, limit_s=60)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- changes in spread


def _nights(rng: np.random.Generator, sd_ratio: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """40 nightly values in threshold units (0.3 + noise sd 0.1); from night 21 the sd times ``sd_ratio``, from
    night 26 the mean ``shift`` higher."""
    x = 0.3 + rng.normal(0, 0.1, 40)
    x[20:] = 0.3 + rng.normal(0, 0.1 * sd_ratio, 20)
    x[25:] += shift
    return x


def test_a_flat_history_keeps_its_spread_quiet() -> None:
    rng = np.random.default_rng(0)
    alarms = sum(spread_change(_nights(rng)) is not None for _ in range(50))
    assert alarms <= 1  # alpha 0.01 a look: 0.5 expected


def test_a_mean_shift_is_not_a_change_in_spread() -> None:
    rng = np.random.default_rng(0)
    assert all(spread_change(_nights(rng, shift=1.0)) is None for _ in range(30))


def test_a_tripled_noise_is_found_where_it_began_and_a_doubled_one_sometimes() -> None:
    rng = np.random.default_rng(0)
    found = [spread_change(_nights(rng, sd_ratio=3.0)) for _ in range(30)]
    hits = [f for f in found if f is not None]
    assert len(hits) >= 8, len(hits)  # 11 of 30 at one look after 20 noisy nights (alpha 0.002)
    assert all(2.0 <= f.ratio <= 5.0 and f.index >= 17 and f.p_value <= 0.002 for f in hits)
    assert 20 <= sorted(f.index for f in hits)[len(hits) // 2] <= 23  # where it began, give or take the noise
    doubled = sum(spread_change(_nights(rng, sd_ratio=2.0)) is not None for _ in range(30))
    assert doubled >= 2, doubled  # a doubling in 20 nights: 4 of 30 at one look (nightly looks find more)


def test_a_quieter_metric_is_a_change_in_spread_too() -> None:
    rng = np.random.default_rng(1)
    hits = [f for f in (spread_change(_nights(rng, sd_ratio=1 / 3)) for _ in range(20)) if f is not None]
    assert hits and all(f.ratio < 1 / 2 for f in hits)


def test_a_long_history_reports_its_spread_change_where_it_began_in_the_whole_history() -> None:
    rng = np.random.default_rng(0)
    x = 0.3 + rng.normal(0, 0.1, 100)
    x[40:60] += 0.8  # an old mean regime, before the window of the latest 60 runs starts
    x[85:] = 0.3 + rng.normal(0, 0.5, 15)  # the noise x5 over the last 15 runs
    found = spread_change(x)
    assert found is not None and 83 <= found.index <= 87 and found.ratio > 3


def _replicate_nights(rng: np.random.Generator, sd_ratio: float = 1.0, night_sd: float = 0.1, k: int = 3,
                      nights: int = 40, from_night: int = 25) -> list[list[float]]:
    """Night means scattering with ``night_sd``; k replicates around each with sd 0.05, x ``sd_ratio`` from
    ``from_night`` (1-based) on."""
    means = 0.3 + rng.normal(0, night_sd, nights)
    return [list(m + rng.normal(0, 0.05 * (sd_ratio if n + 1 >= from_night else 1.0), k))
            for n, m in enumerate(means)]


def test_replicates_that_agree_as_before_stay_quiet_whatever_the_nights_do() -> None:
    rng = np.random.default_rng(0)
    assert sum(replicate_spread_change(_replicate_nights(rng)) is not None for _ in range(100)) <= 2
    rng = np.random.default_rng(1)  # nights jumping by 5x the replicate scatter is between nights, not among them
    assert sum(replicate_spread_change(_replicate_nights(rng, night_sd=0.25)) is not None for _ in range(50)) <= 1


def test_a_doubled_replicate_noise_is_found_at_the_night_it_began() -> None:
    rng = np.random.default_rng(0)
    hits = [f for f in (replicate_spread_change(_replicate_nights(rng, sd_ratio=2.0)) for _ in range(50)) if f]
    assert len(hits) >= 20, len(hits)  # 27 of 50 at one look after 16 noisier nights of 3 replicates
    assert all(1.5 <= f.ratio <= 3.5 and f.p_value <= 0.002 for f in hits)
    assert 23 <= sorted(f.index for f in hits)[len(hits) // 2] <= 26  # night 25 is index 24


def test_nights_with_one_replicate_say_nothing_about_the_replicates() -> None:
    rng = np.random.default_rng(0)
    nights = _replicate_nights(rng, sd_ratio=3.0)
    assert replicate_spread_change([n[:1] for n in nights]) is None
    found = replicate_spread_change([n if i % 2 else n[:1] for i, n in enumerate(nights)])
    assert found is None or found.index % 2 == 1  # only nights with replicates can start a regime
