"""What a candidate baseline records of its calibration (``provenance:``): the commit every run ran, the case, the
seeds and trackers, the environment, the self-check and the machine's speed probe."""

from __future__ import annotations

import datetime as dt
import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from autotest.calibration.promote import PRODUCED_BY
from autotest.calibration.thresholds import Calibration, SelfCheck
from autotest.errors import UsageError
from autotest.inputs.baseline import CalibrationSpec
from autotest.inputs.case import REPO_ROOT, Case
from autotest.redaction import json_ready

if TYPE_CHECKING:  # runs.py imports this module; its records and options are only named here
    from autotest.calibration.runs import CalibrationOptions, RunRecord


def _relative(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def reference_probe(records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The calibration machine's speed: the median of the runs' probe CPU times (each run's results.json, before
    and after it), so a performance gate can scale a run on a slower or faster machine to this one."""
    times, device = [], None
    for record in records:
        try:
            machine = json.loads((record.results_dir / "results.json").read_text())["context"]["machine"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for when in ("before", "after"):
            probe = (machine.get(when) or {}).get("probe") or {}
            if probe.get("cpu_s"):
                times.append(probe["cpu_s"])
                device = probe.get("device")
    if not times:
        return None
    return {"device": device, "cpu_s": statistics.median(times), "probes": len(times)}


def commit_the_runs_ran(case: Case, records: Sequence[RunRecord]) -> dict[str, Any]:
    """The commit under test as every calibration run recorded it (its preflight.json), for the provenance:
    what ran, never what an environment variable or the tree here pointed at. Runs that disagree (a ref that
    moved between them) are refused in one line."""
    by_sha: dict[str | None, list[RunRecord]] = {}
    commits: dict[str | None, dict[str, Any]] = {}
    for record in records:
        path = record.results_dir / "preflight.json"
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            commit = dict(recorded["commit"])
        except (OSError, ValueError, KeyError, TypeError):
            raise UsageError(f"{path}: the commit this calibration run ran is not readable; nothing written") \
                from None
        framework = recorded.get("framework") or {}
        if framework.get("sha"):  # a fetched ref: name the repository, not the cache's worktree
            commit.update(sha=framework["sha"], repo_dir=framework.get("repo"))
        by_sha.setdefault(commit.get("sha"), []).append(record)
        commits.setdefault(commit.get("sha"), commit)
    if len(by_sha) > 1:
        listed = "; ".join(f"{(sha or 'unknown')[:12]}: {', '.join(r.label for r in runs)}"
                           for sha, runs in by_sha.items())
        raise UsageError(f"{case.name}: the calibration runs ran different commits ({listed}); the ref moved "
                         "between them: calibrate again at one sha (--framework-ref SHA); nothing written")
    return next(iter(commits.values()))


def provenance_of(case: Case, options: CalibrationOptions, preflight: Any, records: Sequence[RunRecord],
                  settings: CalibrationSpec, self_check: SelfCheck, calibration: Calibration,
                 folder: Path, ran: Mapping[str, Any] | None = None,
                 framework_spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The candidate baseline's ``provenance:``: what ran (``ran``: the commit the runs recorded), where, how, the
    self-check, the machine's speed probe, what stayed uncalibrated, and the framework's own spec for the case at the
    commit the runs ran (``framework_spec``: :meth:`autotest.run.framework_spec_read.SpecReading.provenance`)."""
    commit = preflight.commit
    if ran is not None:
        repo = ran.get("repo_dir") or commit.repo_dir
        recorded = {"sha": ran.get("sha"), "branch": ran.get("branch"), "dirty": ran.get("dirty"),
                    "repo": repo if ran.get("ref") else (_relative(Path(repo)) or "."),
                    **({"ref": ran["ref"]} if ran.get("ref") else {}),
                    **({"diff_stat": ran["diff_stat"].splitlines()[-1].strip()} if ran.get("diff_stat") else {})}
    else:
        recorded = {"sha": commit.sha, "branch": commit.branch, "dirty": commit.dirty,
                    "repo": _relative(Path(commit.repo_dir)) or ".",
                    **({"diff_stat": commit.diff_stat.splitlines()[-1].strip()} if commit.diff_stat else {})}
    data: dict[str, Any] = {
        "produced_by": PRODUCED_BY,
        "command": options.command or f"rl-autotest calibrate {case.name} --runs {len(records)}",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "case_file": _relative(case.source),
        "commit": recorded,
        "runs": len(records),
        "seeds": [r.seed for r in records],
        "margin": settings.margin,
        "trackers": [_relative(r.tracker) for r in records],
        "results_dir": _relative(folder),
        "environment": preflight.environment,
        "self_check": {"method": "leave-one-out", "false_alarm_rate": self_check.false_alarm_rate,
                       "held_out": {h.label: h.status for h in self_check.held_out}},
    }
    if framework_spec is not None:
        data["framework_spec"] = dict(framework_spec)
    probe = reference_probe(records)
    if probe is not None:
        data["machine_probe"] = probe
    if options.from_history:
        data["from_history"] = [{"results_dir": str(r.results_dir), "framework_commit": r.framework_sha,
                                 "harness_commit": r.harness_sha} for r in records]
    if preflight.harness.sha != recorded["sha"]:
        data["harness_commit"] = {"sha": preflight.harness.sha, "dirty": preflight.harness.dirty}
    if calibration.uncovered:
        data["uncalibrated_steps"] = {m: list(s) for m, s in calibration.uncovered.items()}
    return json_ready(data)
