"""Time ``rl-autotest consistency analyze`` against ``msprobe compare`` on the same pair of dumps.

    python benchmarks/bench_consistency_analyze.py [--layers 8] [--hidden 256] [--seq 64] [--repeats 3]

Two processes dump one forward of a Qwen3 (``transformers``, random init) with MSProbe task
tensor, level L0: the training side as is, the rollout side with layer 5's
``post_attention_layernorm`` epsilon at 1e-2 (an implementation mismatch). Both sides keep HF names
so that ``msprobe compare`` can match them without mapping files. Each tool runs as a fresh
process (imports included, as a user runs it); the figure is the best of ``--repeats`` wall times.
``msprobe compare``'s first divergent module is the first module, in dump order, whose output
breaks MSProbe's acceptance guidance (Cosine < 0.99 or MaxAbsErr > 1e-3); analyze's is its
root cause. The two must agree.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERTURBED = "model.layers.5.post_attention_layernorm"


def make_dump(side: str, out: Path, layers: int, hidden: int, seq: int) -> None:
    """Run in a child process: one forward of one side under MSProbe."""
    import torch
    from msprobe.pytorch import PrecisionDebugger
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=1024, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=8, num_key_value_heads=4, head_dim=hidden // 8,
                         max_position_embeddings=2 * seq)  # fmt: skip
    model = Qwen3ForCausalLM(config).eval()
    if side == "rollout":
        model.get_submodule(PERTURBED).variance_epsilon = 1e-2
    cfg = out / f"msprobe_{side}.json"
    cfg.write_text(json.dumps({"task": "tensor", "dump_path": str(out / side), "rank": [], "step": [0],
                               "level": "L0", "tensor": {"scope": [], "list": [], "data_mode": ["forward"]}}))
    debugger = PrecisionDebugger(config_path=str(cfg))
    ids = torch.randint(0, 1024, (1, seq), generator=torch.Generator().manual_seed(1))
    debugger.start(model=model)
    with torch.no_grad():
        model(ids)
    debugger.stop()
    debugger.step()


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return elapsed


def msprobe_first_divergence(out: Path) -> str | None:
    table = max(out.glob("**/*.csv"), key=lambda p: p.stat().st_mtime)
    with table.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            name = row.get("NPU Name") or row.get("Target Name") or ""
            if ".forward." not in name or ".output." not in name:
                continue
            try:
                cosine, max_abs = float(row["Cosine"]), float(row["MaxAbsErr"])
            except (KeyError, ValueError):
                continue
            if cosine < 0.99 or max_abs > 1e-3:
                return name.split(".forward.")[0].removeprefix("Module.").rsplit(".", 1)[0]
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--make-dump", choices=["train", "rollout"], help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.make_dump:
        make_dump(args.make_dump, args.out, args.layers, args.hidden, args.seq)
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        shape = ["--layers", str(args.layers), "--hidden", str(args.hidden), "--seq", str(args.seq)]
        for side in ("train", "rollout"):
            _timed([sys.executable, __file__, "--make-dump", side, "--out", str(out), *shape], env)
        train, rollout = out / "train" / "step0", out / "rollout" / "step0"
        size_mb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
        analyze_cmd = [sys.executable, "-m", "autotest.cli", "consistency", "analyze", "--train-dump", str(train),
                       "--rollout-dump", str(rollout), "--out", str(out / "analyze")]
        msprobe = str(Path(sys.executable).with_name("msprobe"))
        compare_cmd = [msprobe, "compare", "-tp", str(train), "-gp", str(rollout), "-o", str(out / "msprobe")]
        t_analyze = min(_timed(analyze_cmd, env) for _ in range(args.repeats))
        t_msprobe = min(_timed(compare_cmd, env) for _ in range(args.repeats))
        report = json.loads((out / "analyze" / "output_5_root_cause_report.json").read_text())
        ours = (report["root_cause"] or {}).get("module")
        theirs = msprobe_first_divergence(out / "msprobe")
        modules = len(json.loads(next(train.glob("*/dump.json")).read_text())["data"])
    print(f"dumps: {modules} module calls per side, task tensor, {size_mb:.1f} MB in all "
          f"({args.layers} layers, hidden {args.hidden}, {args.seq} tokens)")
    print(f"rl-autotest consistency analyze: {t_analyze:.2f} s -> first divergence {ours}")
    print(f"msprobe compare:                 {t_msprobe:.2f} s -> first divergent output {theirs}")
    print(f"speed-up {t_msprobe / t_analyze:.1f}x; agree: {ours == theirs == PERTURBED}")
    if ours != theirs:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
