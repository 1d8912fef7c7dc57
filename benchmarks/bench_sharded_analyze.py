"""Time and peak memory of ``consistency analyze`` on a 4-rank tensor-parallel rollout dump against the same analysis
on the unsharded (single-rank) rollout, and what ``msprobe compare`` makes of one rank of it.

    python benchmarks/bench_sharded_analyze.py [--scale 8,256,128] [--repeats 3]

One forward per side of a Qwen3 of ``--scale`` (layers, hidden, tokens; 8 query and 4 kv heads), dumped with MSProbe
(task tensor, L0) by :mod:`autotest.workloads.sharded_dump`: the trainer in one process, the rollout engine in one
process and served tensor-parallel over 4 gloo processes (clean, then with rank 3's slice of a down_proj stale).
Each analysis is a fresh process (imports included); its figure is the best wall time of ``--repeats`` and its peak
resident memory. ``msprobe compare`` is given rank 0 of the 4-rank dump against the unsharded engine dump (same module
names): it runs, and cannot compare the tensors each rank holds only a slice of.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotest.workloads.sharded_dump import dump_side  # noqa: E402

_PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
         "sys.stderr.write(r.stderr[-2000:]) if r.returncode else None; "
         "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def measured(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of ``cmd`` run to the end in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    code, peak_kb = done.stdout.split()
    if code != "0":
        raise SystemExit(f"{cmd[:5]} exited {code}: {done.stderr[-1500:]}")
    return elapsed, int(peak_kb) / 1024


def analyze(base: Path, rollout: str, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "autotest.cli", "consistency", "analyze", "--train-dump", str(base / "train" / "dump"),
            "--rollout-dump", str(base / rollout / "dump"), "--train-correlation",
            str(base / "train" / "correlation.jsonl"), "--rollout-correlation",
            str(base / rollout / "correlation.jsonl"), "--out", str(out)]


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", default="8,256,128", help="LAYERS,HIDDEN,TOKENS")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    scale = tuple(int(v) for v in args.scale.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name, side, tp, fault in (("train", "train", 1, ""), ("rollout-tp1", "rollout", 1, ""),
                                      ("rollout-tp4", "rollout", 4, ""),
                                      ("rollout-tp4-stale", "rollout", 4, "stale-shard")):
            dump_side(side, base / name, tp=tp, fault=fault, requests="r0", scale=scale)  # type: ignore[arg-type]
        rows = {}
        for rollout in ("rollout-tp1", "rollout-tp4"):
            runs = [measured(analyze(base, rollout, base / f"out-{rollout}-{i}")) for i in range(args.repeats)]
            rows[rollout] = (min(t for t, _ in runs), max(m for _, m in runs), size_mb(base / rollout / "dump"))
        measured(analyze(base, "rollout-tp4-stale", base / "out-stale"))
        report = json.loads((base / "out-stale" / "output_5_root_cause_report.json").read_text())
        cause = report["root_cause"] or {}
        ranks = sorted(p for p in (base / "rollout-tp4" / "dump" / "step1").iterdir())
        solo = base / "msprobe-rank0"
        solo.mkdir()
        (solo / "rank0").symlink_to(ranks[0])
        engine = base / "msprobe-engine"
        engine.mkdir()
        (engine / "rank0").symlink_to(next((base / "rollout-tp1" / "dump" / "step1").iterdir()))
        msprobe = str(Path(sys.executable).with_name("msprobe"))
        t_ms, m_ms = measured([msprobe, "compare", "-tp", str(solo), "-gp", str(engine), "-o", str(base / "ms")])
        table = next((base / "ms").glob("*.csv"))
        with table.open(encoding="utf-8") as fh:
            outputs = [r for r in csv.DictReader(fh) if ".output." in r["NPU Name"]]
        unmatched = sum("shape" in (r.get("Err_message") or "").lower() for r in outputs)
    layers, hidden, tokens = scale
    print(f"model: {layers} layers, hidden {hidden}, {tokens} tokens, one forward per side, task tensor; "
          f"train dump {rows['rollout-tp1'][2]:.0f} MB-class")
    for rollout, (wall, peak, mb) in rows.items():
        print(f"analyze vs {rollout:12s}: {wall:5.2f} s, peak {peak:5.0f} MiB (rollout dump {mb:.0f} MB)")
    one, four = rows["rollout-tp1"], rows["rollout-tp4"]
    print(f"4-rank / single-rank: time {four[0] / one[0]:.2f}x, peak memory {four[1] / one[1]:.2f}x")
    print(f"stale shard on rank 3: root cause {cause.get('module')} ({cause.get('bucket')}), ranks {cause.get('ranks')}")
    print(f"msprobe compare (rank 0 of 4 vs the unsharded engine): {t_ms:.2f} s, peak {m_ms:.0f} MiB; "
          f"{unmatched} of {len(outputs)} module outputs not compared (shape unmatched)")
    if cause.get("module") != "model.layers.1.mlp.down_proj" or cause.get("ranks") != [3]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
