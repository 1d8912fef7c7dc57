"""Write results folders shaped like the harness's own (results.json, preflight.json, tracker copy)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from autotest.history.database import sqlite_url
from autotest.history.store import ingest
from tests.helpers import write_tracker

#: two gated statistics with thresholds (as tiny-grpo's baseline has them) and a structural gate
REWARDS = "response/rewards/mean[percentile]"
STEP_TIME = "time/step[percentile]"
THRESHOLDS = {REWARDS: 0.19, STEP_TIME: 1.0}
METRICS = {REWARDS: "response/rewards/mean", STEP_TIME: "time/step"}
FIRST_NIGHT = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)


def write_results_folder(root: Path, case: str, night: int, observed: dict[str, float],
                         status: str | None = None, sha: str | None = None, tracker: bool = True,
                         fault: str | None = None, kind: str | None = None, cost: dict | None = None,
                         mde: dict[str, float] | None = None) -> Path:
    """One nightly's results folder at ``<root>/<case>/night-NN``; status follows the thresholds; ``cost`` is
    ``context.cost`` and ``mde`` each gate's minimum detectable effect, as a run writes them."""
    started = FIRST_NIGHT + timedelta(days=night)
    folder = root / case / f"night-{night:02d}"
    folder.mkdir(parents=True, exist_ok=True)
    results = [{"check_id": "steps[count]", "status": "PASS", "kind": "structural", "severity": "gate",
                "observed": 10.0, "threshold": None, "message": "10 training steps", "points": {}}]
    for check_id, value in observed.items():
        passed = value < THRESHOLDS[check_id]
        results.append({"check_id": check_id, "status": "PASS" if passed else "FAIL", "kind": "metric",
                        "metric": METRICS[check_id], "method": "absolute", "operator": "<",
                        "threshold": THRESHOLDS[check_id], "scope": "percentile", "severity": "gate",
                        "observed": value, "message": "", "points": {}, "mde": (mde or {}).get(check_id)})
    verdict = status or ("PASS" if all(r["status"] == "PASS" for r in results) else "FAIL")
    commit = {"sha": sha or hashlib.sha1(f"night {night}".encode()).hexdigest(), "branch": "main", "dirty": False}
    data = {"status": verdict, "case": case, "schema_version": 1, "results": results, "triage": [],
            "context": {"commit": commit, "harness_commit": {"sha": "a" * 40, "dirty": False},
                        "launch": {"started_at": started.isoformat()}, "fault": fault}}
    if kind is not None:
        data["context"]["kind"] = kind
    if cost is not None:
        data["context"]["cost"] = cost
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    (folder / "preflight.json").write_text(json.dumps({"created_at": started.isoformat(), "environment": {
        "machine": "x86_64", "cpu_count": 16, "gpu": {"models": ["NVIDIA H200"] * 8, "driver": "560.35",
                                                       "cuda": "12.6"}}}), encoding="utf-8")
    if tracker:
        write_tracker(folder / "tracker.jsonl", {
            s: {"response/rewards/mean": 0.1 * s, "time/step": 1.0 + 0.01 * s} for s in range(1, 11)})
    return folder


def nightly_values(nights: int, shift_at: int | None, shift_thresholds: float, seed: int) -> list[dict[str, float]]:
    """Per night the two statistics: noise of 0.1 threshold around 0.3 threshold; one shift on rewards."""
    rng = np.random.default_rng(seed)
    values = []
    for night in range(1, nights + 1):
        rewards = 0.3 + rng.normal(0, 0.1) + (shift_thresholds if shift_at and night >= shift_at else 0.0)
        step_time = 0.3 + rng.normal(0, 0.1)
        values.append({REWARDS: max(rewards, 0.0) * THRESHOLDS[REWARDS],
                       STEP_TIME: max(step_time, 0.0) * THRESHOLDS[STEP_TIME]})
    return values


def write_nightlies(root: Path, case: str, nights: int = 40, shift_at: int | None = None,
                    shift_thresholds: float = 0.5, seed: int = 0) -> list[Path]:
    return [write_results_folder(root, case, night, observed)
            for night, observed in enumerate(nightly_values(nights, shift_at, shift_thresholds, seed), start=1)]


FLEET_CASES = [f"case-{i}" for i in range(8)]
NIGHTS, CHANGE = 40, 31


def sha(night: int) -> str:
    """The fleet's framework commit of a night (its number readable back: ``night_of``)."""
    return f"{night:04d}" + "c" * 36


def night_of(commit: str) -> int:
    return int(commit[:4])


def fleet(root: Path, *, shift: float = 0.0, torch_at: int | None = None, cases=FLEET_CASES, seed: int = 0,
          change: int = CHANGE) -> str:
    """Every case's 40 nightlies: one framework commit per night (the fleet's), statistics at 0.3 threshold plus
    noise of 0.1 threshold, ``shift`` thresholds added to the rewards from night ``change`` on."""
    rng = np.random.default_rng(seed)
    for case in cases:
        for n in range(1, NIGHTS + 1):
            rewards = 0.3 + rng.normal(0, 0.1) + (shift if n >= change else 0.0)
            observed = {REWARDS: max(rewards, 0.0) * THRESHOLDS[REWARDS],
                        STEP_TIME: max(0.3 + rng.normal(0, 0.1), 0.0) * THRESHOLDS[STEP_TIME]}
            folder = write_results_folder(root, case, n, observed, sha=sha(n))
            preflight = json.loads((folder / "preflight.json").read_text())
            torch = "2.5.0" if torch_at is not None and n >= torch_at else "2.4.0"
            preflight["environment"]["packages"] = {"torch": torch, "numpy": "2.1.0"}
            (folder / "preflight.json").write_text(json.dumps(preflight))
    url = sqlite_url(root / "history.sqlite")
    ingest([root], url)
    return url


def write_replicated_nightlies(root, nights: int = 40, from_night: int = 25, sd_ratio: float = 3.0, k: int = 3):
    """Each night a run of ``k`` replicates (``night-NN/replicates/rK``): night means scatter by 0.1 threshold,
    replicates around them by 0.04, ``sd_ratio`` times that from ``from_night`` on."""
    rng = np.random.default_rng(5)
    for night in range(1, nights + 1):
        mean = 0.3 + rng.normal(0, 0.1)
        sd = 0.04 * (sd_ratio if night >= from_night else 1.0)
        run = root / "c" / f"night-{night:02d}"
        for r in range(k):
            values = {REWARDS: (mean + rng.normal(0, sd)) * THRESHOLDS[REWARDS],
                      STEP_TIME: (0.3 + rng.normal(0, 0.02)) * THRESHOLDS[STEP_TIME]}
            (run / "replicates").mkdir(parents=True, exist_ok=True)
            write_results_folder(root / "staging", "c", night, values).rename(run / "replicates" / f"r{r}")
        (run / "results.json").write_text((run / "replicates" / "r0" / "results.json").read_text())
