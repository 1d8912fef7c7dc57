"""``rl-autotest consistency analyze``: the analysis on MSProbe dumps made outside the harness.

Exit 0 when the analysis ran, whatever it found (the verdict is in output_5); 2 with one line
when the inputs cannot be analysed (which folder, what was expected). The options are the
analysis' own inputs; everything else (thresholds, mapping rules) lives in files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.layout import parse_layout
from autotest.errors import UsageError

EXIT_OK, EXIT_USAGE = 0, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rl-autotest consistency analyze",
        description="Localise a train/inference divergence from a pair of MSProbe L0 dumps (any framework).",
    )
    p.add_argument("--train-dump", required=True, type=Path,
                   help="training side: an MSProbe dump_path (step{N}/rank{R}|proc{pid}/dump.json), a step or rank folder")
    p.add_argument("--rollout-dump", required=True, type=Path, help="inference side, same layouts")
    p.add_argument("--train-correlation", type=Path,
                   help="training-side correlation log (JSON lines, source update_actor): pairs ranks by request id")
    p.add_argument("--rollout-correlation", type=Path,
                   help="rollout-side correlation log (JSON lines, source dispatch_logger)")
    p.add_argument("--mapping", type=Path,
                   help="YAML/JSON module mapping for names the built-in rules do not know (rules / modules)")
    p.add_argument("--step", type=int, help="the step to compare (default: the step both dumps hold)")
    p.add_argument("--out", required=True, type=Path, help="folder for output_1 … output_5")
    p.add_argument("--logprobs", type=Path, action="append",
                   help="per-token log-prob records (JSON lines: recorded while sampling, rollout recompute, trainer; "
                        "format in autotest/consistency/logprob_records.py), a file or a folder; repeatable. Without "
                        "them the sampling path is not checked")
    p.add_argument("--statistics-only", action="store_true", help="ignore dumped tensors (faster screening)")
    for side in ("train", "rollout"):
        p.add_argument(f"--{side}-layout", metavar="tp=N,pp=N,...",
                       help=f"the {side} side's parallel layout (tp, pp, heads, kv_heads, partial=GLOB): its per-rank "
                            "dumps are reassembled before comparing; default: inferred from the rank folders")
    return p  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:

    args = build_parser().parse_args(argv)
    try:
        layouts = {side: parse_layout(getattr(args, f"{side}_layout"), f"--{side}-layout")
                   for side in ("train", "rollout")}
        report = analyze_dumps(
            args.train_dump, args.rollout_dump, args.out,
            train_correlation=args.train_correlation, rollout_correlation=args.rollout_correlation,
            mapping_file=args.mapping, step=args.step, strict=True, use_tensors=not args.statistics_only,
            logprobs=args.logprobs, layouts=layouts,
        )  # fmt: skip
    except UsageError as exc:
        print(f"rl-autotest consistency analyze: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    cause = report.root_cause
    if cause:
        parts = f" (diverging part: {', '.join(cause['divergent_parts'])})" if cause.get("divergent_parts") else ""
        print(f"first divergence: {cause['module']}{parts}: {cause['bucket']}, {report.confidence} confidence, "
              f"{cause['evidence']} evidence")
        print(f"  train module(s): {', '.join(cause['train_modules'])}")
        print(f"  rollout module(s): {', '.join(cause['rollout_modules'])}")
        if cause.get("ranks"):
            print(f"  rank(s): {', '.join(map(str, cause['ranks']))}: {cause['rank_evidence'][0]}")
    else:
        print(f"verdict: {report.verdict.replace('_', ' ')}{left_out_note(report.sharding)}")
    print(f"divergence: {report.divergence.replace('_', ' ')}")
    for pair in (report.logprobs or {}).get("pairs", []):
        print(f"log-probs {pair['pair']} ({pair['reference']} vs {pair['other']}): "
              + (f"{pair['status']}, k3 {pair['k3']:.3e}, max |diff| {pair['max_abs_diff']:.3e}"
                 if pair["k3"] is not None else f"not compared: {pair['detail']}"))
    for side, info in (report.sharding or {}).items():
        if isinstance(info, dict) and info.get("groups"):
            print(f"{side} dumps reassembled: {'; '.join(info['groups'])}")
        findings = info.get("findings", []) if isinstance(info, dict) else []
        for finding in findings[:3]:
            print(f"{side} {finding['kind']} at {finding['module']} (ranks {finding['ranks']}): {finding['detail']}")
        if len(findings) > 3:
            print(f"  ... and {len(findings) - 3} more (output_5, Sharded dumps)")
    for note in report.assumptions:
        print(f"assumption: {note}")
    print(f"root-cause report: {args.out / 'output_5_root_cause_report.md'}")
    return EXIT_OK


def left_out_note(sharding: dict | None) -> str:
    """What the verdict line adds when sharded tensors could not be compared: "no divergence" is then only about
    the rest, and the console says so (the findings follow it, the report has them all)."""
    from autotest.consistency.rank_groups import LEFT_OUT

    left = [f for info in (sharding or {}).values() if isinstance(info, dict)
            for f in info.get("findings", []) if f.get("kind") in LEFT_OUT]
    if not left:
        return ""
    sides = sorted({f["side"] for f in left})
    return (f" among the tensors compared; {len(left)} tensor(s) of the {' and '.join(sides)} dumps were left out "
            "or compared by statistics alone (listed below and in output_5, Sharded dumps): not a clean pass")


if __name__ == "__main__":
    sys.exit(main())
