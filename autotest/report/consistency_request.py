"""The consistency dump job's request: written beside a verdict whose train-inference metrics breached.

The accuracy run only asks; ``rl-autotest consistency`` (``autotest.consistency.job``) reads the
request, possibly on another runner from the uploaded results folder, and runs the dump job.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path

from autotest.files import write_atomic
from autotest.inputs.case import REPO_ROOT, Case
from autotest.inputs.tracker_layout import tracker_copy
from autotest.inputs.baseline_model import SHADOW
from autotest.judge.model import FAIL, Verdict
from autotest.judge.triage import is_consistency_metric


def consistency_request(case: Case, verdict: Verdict, results_dir: Path, work_dir: Path) -> dict | None:
    """The request for a consistency dump job, or None when the case's policy says no.

    Paths are relative to the results folder (the folder holding the request) and the case file is
    relative to the harness checkout, so a job on another runner works from the uploaded artifact.
    """
    policy = case.consistency.policy
    # a NaN is numerical divergence, not a train-inference disagreement a dump could localise
    # the mismatch role as the verdict assigned it (declared roles, preset); the names alone as a fallback
    breached = [r for r in verdict.results if (verdict.metric_roles.get(r.metric or "") == "mismatch"
                                               if verdict.metric_roles else is_consistency_metric(r.metric))
                and r.kind == "metric"  # a resume check's mismatch metric compares two runs, not train-inference
                and r.status == FAIL and r.observed is not None and math.isfinite(r.observed)
                and r.severity != SHADOW]  # a shadow gate's breach is recorded, never acted on
    if policy == "off" or (policy == "on-breach" and not breached):
        return None
    source = Path(case.source).resolve()
    return {
        "schema_version": 2,
        "paths": "relative to the folder holding this file; case_file relative to the harness checkout",
        "case": case.name,
        "case_file": str(source.relative_to(REPO_ROOT)) if source.is_relative_to(REPO_ROOT) else str(source),
        "policy": policy,
        "reason": "breach" if breached else "always",
        "breaches": [{"metric": r.metric, "first_breach_step": r.first_breach_step, "worst_step": r.worst_step,
                      "threshold": r.threshold, "operator": r.operator,
                      "points": [{"step": p.step, "current": p.current, "baseline": p.baseline}
                                 for p in r.points.breaches()[:20]]} for r in breached],
        "results_dir": ".",
        "work_dir": os.path.relpath(work_dir, results_dir),
        "tracker": getattr(tracker_copy(results_dir), "name", "tracker.jsonl"),  # the log copy, in any format
        "run_config": "run_config",
        "requested_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def write_consistency_request(case: Case, verdict: Verdict, results_dir: Path, work_dir: Path) -> Path | None:
    """Write ``consistency_request.json`` into the results folder when the case's policy asks for one."""
    request = consistency_request(case, verdict, results_dir, work_dir)
    if not request:
        return None
    path = results_dir / "consistency_request.json"
    write_atomic(path, json.dumps(request, indent=2) + "\n")
    verdict.context["consistency_request"] = str(path)
    return path
