"""Drift detection power: false alarms on histories without a change, delay on injected shifts.

    python benchmarks/bench_drift.py [--histories 100] [--nights 40] [--shift-night 25]

Each synthetic history is one gated statistic over nightlies, already divided by its threshold:
0.3 plus noise (normal with sd 0.1 or 0.2 of the threshold, or Student t with 3 degrees of
freedom scaled to sd 0.1 for heavy tails). The history is monitored as the nightly does: after
every night from night 10 on, ``latest_change`` runs on the history so far with the default
``DriftParams``. A false alarm is any report on a history with no change (per history: at least
one of its 31 nightly looks; per look: the share of all looks). On a history with a shift of
the given size from ``--shift-night`` on, the delay is the number of shifted nights seen when
drift is first reported, and "start ±1" is the share whose reported start is within a night.

Then the same monitoring for changes in spread (``spread_change``): on the same noises without a change (false
alarms), and with the noise's sd multiplied from ``--shift-night`` on (detected by the last night, median delay),
and on a mean shift of 1.0 threshold with the noise unchanged (a mean change must not read as one in spread).

Then changes in the spread between replicates (``replicate_spread_change``), for a case run with ``--replicates K``
seeds a night: night means scatter with sd 0.1 of the threshold, replicates around them with sd 0.05; no change
(false alarms), the replicates' sd multiplied from ``--shift-night`` on, and the nights' sd multiplied instead (a
change between nights must not read as one among replicates).
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotest.history.changepoint import (  # noqa: E402
    DriftParams,
    latest_change,
    replicate_spread_change,
    spread_change,
)

FIRST_LOOK = 10
NOISES = {"normal sd 0.1": ("normal", 0.1), "normal sd 0.2": ("normal", 0.2), "t3 sd 0.1": ("t3", 0.1)}
SHIFTS = (0.1, 0.2, 0.3, 0.5, 1.0)
SD_RATIOS = (1.5, 2.0, 3.0)


def history(rng: np.random.Generator, nights: int, noise: str, sd: float, shift: float, shift_night: int):
    if noise == "normal":
        eps = rng.normal(0, sd, nights)
    else:  # Student t, df 3, has variance 3: scale to the asked sd
        eps = rng.standard_t(3, nights) * sd / np.sqrt(3)
    x = 0.3 + eps
    x[shift_night - 1:] += shift
    return x


def monitor(x: np.ndarray, params: DriftParams, shift_night: int) -> tuple[list[int], int | None, int | None]:
    """Nights with a report, the first report's night after the shift, and its reported start night."""
    alarms, first, start = [], None, None
    for night in range(FIRST_LOOK, len(x) + 1):
        change = latest_change(x[:night], params)
        if change is not None:
            alarms.append(night)
            if first is None and night >= shift_night:
                first, start = night, change.index + 1
    return alarms, first, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=100)
    parser.add_argument("--nights", type=int, default=40)
    parser.add_argument("--shift-night", type=int, default=25)
    parser.add_argument("--spread-only", action="store_true", help="only the changes in spread")
    parser.add_argument("--replicates", type=int, default=3, help="replicates a night for the between-replicates part")
    args = parser.parse_args(argv)
    params = DriftParams()
    looks = args.nights - FIRST_LOOK + 1
    began = time.perf_counter()
    print(f"{args.histories} histories of {args.nights} nights per row; monitored nightly from night {FIRST_LOOK}; "
          f"shift from night {args.shift_night}; alpha {params.alpha}, min shift {params.min_shift} x threshold\n")
    print("| noise | shift (x threshold) | false alarms per history | per nightly look "
          "| detected by night {0} | median delay (nights) | 90th pct delay | start ±1 night |".format(args.nights))
    print("|---|---|---|---|---|---|---|---|")
    for label, (noise, sd) in ({} if args.spread_only else NOISES).items():
        for shift in (0.0, *SHIFTS):
            rng = np.random.default_rng(zlib.crc32(f"{label} {shift}".encode()))
            any_alarm = looks_alarmed = 0
            delays, starts_ok = [], 0
            for _ in range(args.histories):
                x = history(rng, args.nights, noise, sd, shift, args.shift_night)
                alarms, first, start = monitor(x, params, args.shift_night)
                before = [n for n in alarms if n < args.shift_night] if shift else alarms
                any_alarm += bool(before)
                looks_alarmed += len(before)
                if shift and first is not None:
                    delays.append(first - args.shift_night + 1)
                    starts_ok += abs(start - args.shift_night) <= 1
            if shift == 0.0:
                print(f"| {label} | none | {any_alarm / args.histories:.1%} | "
                      f"{looks_alarmed / (args.histories * looks):.2%} | - | - | - | - |")
            else:
                found = len(delays)
                median = f"{np.median(delays):.0f}" if delays else "-"
                p90 = f"{np.percentile(delays, 90):.0f}" if delays else "-"
                print(f"| {label} | {shift} | {any_alarm / args.histories:.1%} (before the shift) | - | "
                      f"{found / args.histories:.0%} | {median} | {p90} | "
                      f"{(starts_ok / found if found else 0):.0%} |")
    print(f"\nChanges in spread, monitored the same way (alpha {params.spread_alpha}, at least x{params.min_spread_ratio}"
          " either way):\n")
    print(f"| noise | change from night {args.shift_night} | histories with a report before it | detected by night "
          f"{args.nights} | median delay (nights) |")
    print("|---|---|---|---|---|")
    for label, (noise, sd) in NOISES.items():
        for change in ("none", *(f"sd x{r:g}" for r in SD_RATIOS), "mean +1.0"):
            rng = np.random.default_rng(zlib.crc32(f"spread {label} {change}".encode()))
            early = found = 0
            delays = []
            for _ in range(args.histories):
                x = history(rng, args.nights, noise, sd, 0.0, args.shift_night)
                if change.startswith("sd"):
                    ratio = float(change[4:])
                    x[args.shift_night - 1:] = 0.3 + (x[args.shift_night - 1:] - 0.3) * ratio
                elif change.startswith("mean"):
                    x[args.shift_night - 1:] += 1.0
                alarms = [n for n in range(FIRST_LOOK, len(x) + 1) if spread_change(x[:n], params) is not None]
                before = [n for n in alarms if n < args.shift_night] if change != "none" else alarms
                early += bool(before)
                after = [n for n in alarms if n >= args.shift_night]
                if change != "none" and after:
                    found += 1
                    delays.append(after[0] - args.shift_night + 1)
            detected = "-" if change == "none" else f"{found / args.histories:.0%}"
            median = f"{np.median(delays):.0f}" if delays else "-"
            print(f"| {label} | {change} | {early / args.histories:.1%} | {detected} | {median} |")
    replicate_table(args, params)
    print(f"\n{time.perf_counter() - began:.0f} s")
    return 0


def replicate_table(args: argparse.Namespace, params: DriftParams) -> None:
    k = args.replicates
    print(f"\nChanges in spread between the {k} replicates of each night (alpha {params.spread_alpha}, at least "
          f"x{params.min_spread_ratio} either way):\n")
    print(f"| change from night {args.shift_night} | histories with a report before it | detected by night "
          f"{args.nights} | median delay (nights) |")
    print("|---|---|---|---|")
    for change in ("none", *(f"replicate sd x{r:g}" for r in SD_RATIOS), "night sd x3"):
        rng = np.random.default_rng(zlib.crc32(f"replicates {k} {change}".encode()))
        early = found = 0
        delays = []
        for _ in range(args.histories):
            ratio = float(change.rsplit("x", 1)[1]) if change != "none" else 1.0
            shifted = np.arange(1, args.nights + 1) >= args.shift_night
            night_sd = np.where(shifted & change.startswith("night"), 0.1 * ratio, 0.1)
            rep_sd = np.where(shifted & change.startswith("replicate"), 0.05 * ratio, 0.05)
            means = 0.3 + rng.normal(0, 1, args.nights) * night_sd
            nights = [list(m + rng.normal(0, s, k)) for m, s in zip(means, rep_sd)]
            alarms = [n for n in range(FIRST_LOOK, args.nights + 1)
                      if replicate_spread_change(nights[:n], params) is not None]
            before = [n for n in alarms if n < args.shift_night] if change.startswith("replicate") else alarms
            early += bool(before)
            after = [n for n in alarms if n >= args.shift_night]
            if change.startswith("replicate") and after:
                found += 1
                delays.append(after[0] - args.shift_night + 1)
        detected = f"{found / args.histories:.0%}" if change.startswith("replicate") else "-"
        median = f"{np.median(delays):.0f}" if delays else "-"
        print(f"| {change} | {early / args.histories:.1%} | {detected} | {median} |")


if __name__ == "__main__":
    sys.exit(main())
