"""``rl-autotest ab CASE --base REF --head REF``: the paired A/B gate (autotest.ab; docs/ab.md).

Exit 0 when no paired gate moved beyond the A/A noise, 1 when one did, 2 when nothing could be judged (a broken
run on either side, a baseline without paired noise) or on bad usage.
"""

from __future__ import annotations

import argparse

from autotest.cli.common import CASE_HELP, EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from autotest.cli.flags import add_declared, base_request
from autotest.terminal import echo


def add_ab_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="paired A/B gate: base and head on the same seeds, judged on their differences",
                       description="Run CASE at --base and at --head on the same K seeds, interleaved on this "
                                   "runner, each an ordinary run with its own results folder, and judge every "
                                   "paired gate (a metric's mean over a step window, head - base) against the "
                                   "A/A noise in the baseline's paired: section.",
                       epilog="REF: clean, fault:NAME[:ARG] (embedded workloads), variant:NAME (the case's "
                              "equivalence: variants), a framework ref (branch, tag, sha, refs/pull/N/head), or "
                              "several joined by '+'. Exit 0 pass, 1 a paired gate failed, 2 not judged.")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--base", required=True, metavar="REF", help="what the head is compared against")
    p.add_argument("--head", required=True, metavar="REF", help="the change under test")
    add_declared(p, "ab")
    p.add_argument("--no-plots", action="store_true", help="write ab.md and ab.json only")
    p.add_argument("--aa-check", action="store_true",
                   help="per seed, also run the base again as the A/A pairs were; if that pair moves beyond the "
                        "paired noise the A/B is not judged (exit 2): the noise does not hold on this runner")
    p.add_argument("--split", action="store_true",
                   help="keep every run's rollout batches and, if the A/B fails, train each side on the other's "
                        "to say whether the change lives in the trainer or the rollout (the case's replay: section)")


def ab(args: argparse.Namespace) -> int:
    from autotest.ab.sides import parse_side
    from autotest.ab.interleave import AbOptions, run_ab
    from autotest.calibration.runs import baseline_files
    from autotest.inputs.case import load_case

    from autotest.ab.ab_preflight import ab_seeds

    case = load_case(args.case)
    seeds = ab_seeds(case, args.seeds, args.replicates)  # the table checked each seed; the cap is the platform's
    request = base_request(args, "ab")
    base, head = parse_side(case, "base", args.base), parse_side(case, "head", args.head)
    baseline_path = baseline_files(case, args.baselines_dir)[0] if args.baselines_dir else None
    outcome = run_ab(case, base, head, AbOptions(
        seeds=seeds, results_root=args.results_dir, baseline_path=baseline_path,
        progress=lambda line: echo(line), with_plots=not args.no_plots, split=args.split,
        aa_check=args.aa_check, run=request))
    for result in outcome.verdict.results:
        echo(f"{result.status}: {result.message}")
    if outcome.verdict.reason:
        echo(f"not judged: {outcome.verdict.reason}")
    if outcome.verdict.next_step:
        echo(f"next step: {outcome.verdict.next_step}")
    if outcome.split is not None:
        echo(f"split: {outcome.split.finding.summary}; next: {outcome.split.finding.next_step}")
    elif args.split:
        echo(f"split: not run (the A/B is {outcome.status}: only a failed A/B is split)")
    echo(f"A/B {case.name}: {outcome.status}; report: {outcome.report}")
    return {"PASS": EXIT_PASS, "FAIL": EXIT_FAIL}.get(outcome.status, EXIT_ERROR)
