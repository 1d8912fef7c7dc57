"""Change points in one statistic's history, each with a permutation-test significance.

Pure numerics on a chronological series (a gated check's observed statistic divided by its
threshold, one value per run). Candidates come from binary segmentation (least-squares
cost, a BIC-like penalty on a robust noise scale; ruptures' Binseg, in numpy); each candidate is then tested
against its neighbouring regimes with a permutation test whose statistic is the best split's
cost reduction over the whole stretch, so the search itself is accounted for (as Apache
Otava's E-Divisive does). A change is kept when it is significant and at least
``min_shift`` threshold-units large: the threshold is the scale that matters to a gate.

A change in spread (``spread_change``) is a change in the mean of the absolute residuals once the mean's own
regimes are taken out: the same segmentation and permutation test on |value - its regime's mean|, kept when the
spread grew or shrank by ``min_spread_ratio`` or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class DriftParams:
    """How drift is judged; every default is what ``benchmarks/bench_drift.py`` measured."""

    #: the latest runs examined per statistic
    window_runs: int = 60
    #: a change must hold for this many runs (also the shortest regime a split may leave)
    min_runs_after: int = 3
    #: report a change only when it started within the latest this-many runs
    lookback_runs: int = 20
    #: largest permutation-test p-value that counts as significant
    alpha: float = 0.01
    #: smallest shift, in units of the check's threshold, worth reporting
    min_shift: float = 0.2
    #: permutations per test (p-value resolution 1/(permutations+1))
    permutations: int = 999
    #: the permutation generator's seed, so answers are reproducible
    seed: int = 0
    #: smallest change in spread worth reporting, as a ratio of the rms residuals (either way)
    min_spread_ratio: float = 1.5
    #: largest permutation-test p-value of a change in spread that counts: stricter than ``alpha``, as residuals
    #: are read after the mean's own segmentation and every nightly look tests again
    spread_alpha: float = 0.002

    def __post_init__(self) -> None:
        if self.min_runs_after < 2 or self.window_runs < 2 * self.min_runs_after:
            raise ValueError("drift needs min_runs_after >= 2 and window_runs >= 2 x min_runs_after")
        if not 0 < self.alpha < 1 or self.permutations < 19:
            raise ValueError("drift needs 0 < alpha < 1 and at least 19 permutations")
        if self.min_spread_ratio <= 1 or not 0 < self.spread_alpha < 1:
            raise ValueError("drift needs min_spread_ratio > 1 and 0 < spread_alpha < 1")


@dataclass(frozen=True)
class ChangePoint:
    #: index of the first value of the new regime
    index: int
    before_mean: float
    after_mean: float
    p_value: float
    #: values in the old regime (from the previous change point or the window's start)
    runs_before: int
    #: values in the new regime (up to the next change point or the end)
    runs_after: int

    @property
    def shift(self) -> float:
        return self.after_mean - self.before_mean


def robust_sigma(values: np.ndarray) -> float:
    """Noise scale from the median absolute first difference: a level shift barely moves it."""
    if len(values) < 3:
        return float(np.std(values))
    diffs = np.abs(np.diff(values))
    return float(np.median(diffs) / (0.6745 * math.sqrt(2)))


def split_statistics(rows: np.ndarray, min_size: int) -> np.ndarray:
    """Per row, the largest least-squares cost reduction of one split leaving >= ``min_size`` each side."""
    n = rows.shape[1]
    k = np.arange(min_size, n - min_size + 1)
    cums = np.cumsum(rows, axis=1)
    total = cums[:, -1:]
    left = cums[:, k - 1] / k
    right = (total - cums[:, k - 1]) / (n - k)
    return (k * (n - k) / n * (left - right) ** 2).max(axis=1)


def permutation_p_value(stretch: np.ndarray, min_size: int, permutations: int, rng: np.random.Generator) -> float:
    """P(best split of a shuffled stretch reduces the cost at least as much as the real one)."""
    observed = split_statistics(stretch[None, :], min_size)[0]
    if observed <= 0:
        return 1.0
    shuffled = rng.permuted(np.broadcast_to(stretch, (permutations, len(stretch))), axis=1)
    exceed = int((split_statistics(shuffled, min_size) >= observed * (1 - 1e-12)).sum())
    return (1 + exceed) / (1 + permutations)


def _l2_cost(column: np.ndarray, start: int, end: int) -> float:
    """Least-squares cost of one regime: its sum of squared deviations from its mean."""
    return float(column[start:end].var(axis=0).sum()) * (end - start)


def _best_split(column: np.ndarray, start: int, end: int, min_size: int) -> tuple[int | None, float]:
    """The split of [start, end) that reduces the cost most, and by how much (None: no split leaves
    ``min_size`` on both sides); ties go to the later split."""
    whole = _l2_cost(column, start, end)
    gains = [(whole - _l2_cost(column, start, b) - _l2_cost(column, b, end), b)
             for b in range(start + min_size, end - min_size + 1)]
    if not gains:
        return None, 0.0
    gain, split = max(gains)
    return split, gain


def candidates(values: np.ndarray, min_size: int) -> list[int]:
    """Binary segmentation (least-squares cost) with a penalty of 2 sigma^2 log n (sigma: robust noise scale).

    ruptures' ``Binseg(model="l2", jump=1).predict(pen=...)``, done here in numpy: a history holds at most
    ``window_runs`` values, and importing ruptures (SciPy) cost every recorded verdict 1.2 s.
    """
    n = len(values)
    sigma = robust_sigma(values)
    scale = max(sigma**2, 1e-12 * max(float(np.var(values)), 1e-300))
    penalty = 2 * scale * math.log(n)
    column = np.asarray(values, dtype=float).reshape(-1, 1)
    breaks = [n]
    while True:
        bounds = [0, *breaks]
        splits = [_best_split(column, a, b, min_size) for a, b in zip(bounds, bounds[1:])]
        split, gain = max(splits, key=lambda s: s[1])
        if split is None or not gain > penalty:
            break
        breaks = sorted([*breaks, split])
    return [b for b in breaks if b < n]


def change_points(values: Sequence[float], params: DriftParams = DriftParams()) -> list[ChangePoint]:
    """Significant change points of a chronological series, oldest first."""
    x = np.asarray(values, dtype=float)[-params.window_runs:]
    offset = len(values) - len(x)
    min_size = params.min_runs_after
    if len(x) < 2 * min_size or not np.all(np.isfinite(x)):
        return []
    cands = candidates(x, min_size)
    rng = np.random.default_rng(params.seed)
    while True:
        # test every candidate against its neighbouring regimes; drop the weakest failure and retest,
        # so the regimes left are bounded by significant changes only
        bounds = [0, *cands, len(x)]
        tested = [_test(x, bounds[i - 1], cp, bounds[i + 1], params, rng) for i, cp in enumerate(cands, start=1)]
        failures = [i for i, t in enumerate(tested) if t is None or t.p_value > params.alpha]
        if not failures:
            return [replace(t, index=t.index + offset) for t in tested if t is not None]
        weakest = max(failures, key=lambda i: (tested[i] is None, tested[i].p_value if tested[i] else 0.0))
        del cands[weakest]


def _test(x: np.ndarray, start: int, cp: int, end: int, params: DriftParams,
          rng: np.random.Generator) -> ChangePoint | None:
    before, after = x[start:cp], x[cp:end]
    shift = float(after.mean() - before.mean())
    if abs(shift) < params.min_shift:
        return None
    p = permutation_p_value(x[start:end], params.min_runs_after, params.permutations, rng)
    return ChangePoint(cp, float(before.mean()), float(after.mean()), p, cp - start, end - cp)


def latest_change(values: Sequence[float], params: DriftParams = DriftParams()) -> ChangePoint | None:
    """The change into the current regime, if significant, large enough and recent (``lookback_runs``)."""
    found = change_points(values, params)
    if not found:
        return None
    last = found[-1]
    return last if last.index >= len(values) - params.lookback_runs else None


#: a spread change whose later values fall this little on one side of the earlier median is a mean change instead
ONE_SIDED_SHARE = 0.2


@dataclass(frozen=True)
class SpreadChange:
    #: index of the first value of the new regime
    index: int
    #: root mean square residual (value less its mean regime's mean) before and after, in the series' units
    before_spread: float
    after_spread: float
    p_value: float

    @property
    def ratio(self) -> float:
        return self.after_spread / self.before_spread if self.before_spread > 0 else math.inf


def variance_split_statistics(rows: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of residuals, the largest normal likelihood-ratio statistic of one change in variance leaving
    >= ``min_size`` each side, and the split that gives it."""
    n = rows.shape[1]
    k = np.arange(min_size, n - min_size + 1)
    cums = np.cumsum(rows * rows, axis=1)
    tiny = 1e-300
    total = np.maximum(cums[:, -1:] / n, tiny)
    left = np.maximum(cums[:, k - 1] / k, tiny)
    right = np.maximum((cums[:, -1:] - cums[:, k - 1]) / (n - k), tiny)
    stat = n * np.log(total) - k * np.log(left) - (n - k) * np.log(right)
    best = stat.argmax(axis=1)
    return stat[np.arange(len(rows)), best], k[best]


def spread_change(values: Sequence[float], params: DriftParams = DriftParams()) -> SpreadChange | None:
    """The change into the current spread regime, if significant, ``min_spread_ratio`` large either way and recent.

    The mean's change points bound its regimes; each value less its regime's mean is a residual. One change in
    their variance is searched for (the normal likelihood ratio over every split) and tested by permuting the
    residuals, the search included. A noisier kernel, an RNG bug or a flaky teacher changes the spread, which a
    mean detector never sees."""
    x = np.asarray(values, dtype=float)[-params.window_runs:]
    offset = len(values) - len(x)
    size = params.min_runs_after
    if len(x) < 2 * size or not np.all(np.isfinite(x)):
        return None
    bounds = [0, *(c.index for c in change_points(x, params)), len(x)]  # x is the window: indices are its own
    residual = np.concatenate([x[a:b] - x[a:b].mean() for a, b in zip(bounds, bounds[1:])])
    observed, split = variance_split_statistics(residual[None, :], size)
    split = int(split[0])
    if split < len(x) - params.lookback_runs:
        return None
    # a mean shift the mean's detector has not confirmed yet (too few runs after it) leaves residuals one side of
    # the old level; more scatter spreads them both ways
    above = float(np.mean(x[split:] > np.median(x[:split])))
    if min(above, 1 - above) < ONE_SIDED_SHARE:
        return None
    before = math.sqrt(float(np.mean(residual[:split] ** 2)))
    after = math.sqrt(float(np.mean(residual[split:] ** 2)))
    ratio = after / before if before > 0 else math.inf
    if max(ratio, 1 / ratio if ratio > 0 else math.inf) < params.min_spread_ratio:
        return None
    rng = np.random.default_rng(params.seed)
    shuffled = rng.permuted(np.broadcast_to(residual, (params.permutations, len(residual))), axis=1)
    exceed = int((variance_split_statistics(shuffled, size)[0] >= observed[0] * (1 - 1e-12)).sum())
    p_value = (1 + exceed) / (1 + params.permutations)
    return SpreadChange(split + offset, before, after, p_value) if p_value <= params.spread_alpha else None


def replicate_spread_change(nights: Sequence[Sequence[float]], params: DriftParams = DriftParams()
                            ) -> SpreadChange | None:
    """The change into the current between-replicate spread regime: how far a night's replicates scatter around
    their own mean, whatever the nights' means do.

    Each replicate less its night's mean (scaled by sqrt(k / (k - 1)), so nights of different sizes weigh alike) is
    a residual; one change in their variance is searched for at night boundaries only (the normal likelihood ratio,
    at least ``min_runs_after`` nights each side) and tested by permuting whole nights, the search included (a
    night's residuals sum to zero, so they are not exchangeable one by one: shuffling them singly makes the test
    too eager). Nights with fewer than 2 replicates say nothing about it and are left out. ``index`` is the first
    night (of ``nights``) of the new regime."""
    kept = [(i, np.asarray(v, dtype=float)) for i, v in enumerate(nights) if len(v) >= 2]
    kept = kept[-params.window_runs:]
    size = params.min_runs_after
    if len(kept) < 2 * size or not all(np.all(np.isfinite(v)) for _, v in kept):
        return None
    squares = np.array([float(np.sum((v - v.mean()) ** 2)) * len(v) / (len(v) - 1) for _, v in kept])
    counts = np.array([len(v) for _, v in kept], dtype=float)
    observed, at = _night_variance_split(squares[None, :], counts[None, :], size)
    first_new = size + int(at[0])  # index into kept of the first night of the new regime
    if first_new < len(kept) - params.lookback_runs:
        return None
    before = math.sqrt(float(squares[:first_new].sum() / counts[:first_new].sum()))
    after = math.sqrt(float(squares[first_new:].sum() / counts[first_new:].sum()))
    ratio = after / before if before > 0 else math.inf
    if max(ratio, 1 / ratio if ratio > 0 else math.inf) < params.min_spread_ratio:
        return None
    rng = np.random.default_rng(params.seed)
    order = rng.permuted(np.broadcast_to(np.arange(len(kept)), (params.permutations, len(kept))), axis=1)
    exceed = int((_night_variance_split(squares[order], counts[order], size)[0] >= observed[0] * (1 - 1e-12)).sum())
    p_value = (1 + exceed) / (1 + params.permutations)
    return SpreadChange(kept[first_new][0], before, after, p_value) if p_value <= params.spread_alpha else None


def _night_variance_split(squares: np.ndarray, counts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of nights (each night's residual sum of squares and count), the largest variance-change likelihood
    ratio over the cuts leaving ``size`` nights each side, and which cut (0: after the first ``size`` nights)."""
    tiny = 1e-300
    ss, nn = np.cumsum(squares, axis=1), np.cumsum(counts, axis=1)
    cut = np.arange(size - 1, squares.shape[1] - size)
    n = nn[:, -1:]
    k = nn[:, cut]
    total = np.maximum(ss[:, -1:] / n, tiny)
    left = np.maximum(ss[:, cut] / k, tiny)
    right = np.maximum((ss[:, -1:] - ss[:, cut]) / (n - k), tiny)
    stat = n * np.log(total) - k * np.log(left) - (n - k) * np.log(right)
    best = stat.argmax(axis=1)
    return stat[np.arange(len(squares)), best], best
