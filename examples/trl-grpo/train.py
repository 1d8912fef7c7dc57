"""A tiny TRL GRPO run on CPU: the third-party trainer rl-autotest's adoption path is tested on.

Nothing here imports rl-autotest: this is the user's own training script, the kind of project the
harness gates. Everything is built locally, so it runs offline and in about half a minute on 2 cores:

- a character-level tokenizer (the ``tokenizers`` library, wrapped as ``PreTrainedTokenizerFast``),
- a 2-layer Qwen2 model built from a config (random init, seeded),
- a toy task in code: the prompt ``a+b=`` (digits), the answer the parity of ``a + b`` (``0`` or ``1``),
- a reward in code: 1.0 when the completion's first character is the right digit, else 0.0. A random
  model starts near 0.07 (1 of 14 tokens); it learns to answer ``0``/``1`` (0.5) within ~15 steps and
  the parity itself more slowly, so the late correct-answer rate moves from seed to seed,
- ``trl.GRPOTrainer`` with ``report_to="tensorboard"`` and a logging callback that writes every
  logged row as one JSON line with its ``step`` to ``<output-dir>/tracker.jsonl``.

Deterministic per ``--seed`` (model init, data order and sampling). The learning rate can be scaled
with ``$GRPO_LR_SCALE`` (default 1) or ``--fault lr_scale:X``: the obvious regression the adoption
test must catch. ``--fault`` also takes the realistic regressions docs/detection-power.md measures:

- ``lr_scale:X``: the learning rate times X (``lr_scale:0.5``: halved),
- ``grader_drop:P``: the grader scores a share P of the correct answers 0 (seeded, so the same per seed),
- ``loss_type:NAME``: GRPOConfig's ``loss_type`` is NAME instead of ``dapo`` (e.g. ``grpo``),
- ``generations:N``: N generations per prompt instead of 8 (the batch of 64 completions then has 64/N prompts).

    python train.py --output-dir out --seed 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

DIGITS = "0123456789"
SPECIAL = ("<pad>", "<eos>")
LEARNING_RATE = 3e-3


def build_tokenizer():
    """A character-level tokenizer over the task's alphabet, no hub download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate((*SPECIAL, *DIGITS, "+", "="))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()  # "1<eos>" decodes to "1", not "1 <eos>"
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")


def build_model(tokenizer, seed: int):
    """A 2-layer Qwen2 with random weights drawn from ``seed``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    return Qwen2ForCausalLM(config)


def build_dataset(seed: int, size: int = 2048):
    """Prompts ``a+b=`` (digits) in a seeded order; the answer is the parity of a + b: ``0`` even, ``1`` odd."""
    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(size):
        a, b = rng.randrange(10), rng.randrange(10)
        rows.append({"prompt": f"{a}+{b}=", "answer": str((a + b) % 2)})
    return Dataset.from_list(rows)


def correct_digit(prompts, completions, answer, **_) -> list[float]:
    """1.0 when the completion starts with the right digit."""
    return [1.0 if completion[:1] == expected else 0.0 for completion, expected in zip(completions, answer)]


def dropping_grader(share: float, seed: int):
    """``correct_digit`` with a bug: a seeded share of the correct answers scores 0."""
    rng = random.Random(seed)

    def correct_digit_with_drops(prompts, completions, answer, **kwargs) -> list[float]:
        return [0.0 if score and rng.random() < share else score
                for score in correct_digit(prompts, completions, answer, **kwargs)]
    correct_digit_with_drops.__name__ = correct_digit.__name__  # TRL logs it under the same name
    return correct_digit_with_drops


FAULTS = ("lr_scale", "grader_drop", "loss_type", "generations")


def parse_fault(fault: str | None) -> tuple[str, str] | None:
    """``NAME:VALUE`` of ``--fault``, or None; an unknown name or a missing value exits with one line."""
    if not fault:
        return None
    name, _, value = fault.partition(":")
    if name not in FAULTS or not value:
        raise SystemExit(f"train.py: --fault {fault!r}: expected NAME:VALUE with NAME one of {', '.join(FAULTS)}, "
                         "e.g. lr_scale:0.5, grader_drop:0.3, loss_type:grpo, generations:4")
    return name, value


def fault_number(fault: tuple[str, str], low: float, high: float) -> float:
    """The fault's value as a number in (low, high]; anything else exits with one line."""
    try:
        value = float(fault[1])
    except ValueError:
        raise SystemExit(f"train.py: --fault {fault[0]}:{fault[1]}: {fault[1]!r} is not a number") from None
    if not (low < value <= high):
        raise SystemExit(f"train.py: --fault {fault[0]}:{fault[1]}: must be in ({low:g}, {high:g}]")
    return value


def lr_scale(fault: str | None) -> float:
    """The learning-rate scale: ``--fault lr_scale:X`` first, else ``$GRPO_LR_SCALE``, else 1."""
    text = os.environ.get("GRPO_LR_SCALE", "1")
    parsed = parse_fault(fault)
    if parsed and parsed[0] == "lr_scale":
        text = parsed[1]
    try:
        scale = float(text)
    except ValueError:
        raise SystemExit(f"train.py: learning-rate scale {text!r} is not a number") from None
    if not (scale > 0 and math.isfinite(scale)):
        raise SystemExit(f"train.py: learning-rate scale {text!r} must be a positive number")
    return scale


def jsonl_logger(path: Path):
    """A ``TrainerCallback`` writing each logged row, with its ``step``, as one line of ``path``."""
    from transformers import TrainerCallback

    class JsonlLogger(TrainerCallback):
        def __init__(self) -> None:
            self.last = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            self.step_time_s = now - self.last
            self.last = now

        def on_log(self, args, state, control, logs=None, **kwargs):
            row = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            if "train_runtime" in row:  # the end-of-training summary, not a step of its own
                return
            if "reward" in row and hasattr(self, "step_time_s"):
                row["step_time"] = self.step_time_s
            with path.open("a") as out:
                out.write(json.dumps({**row, "step": state.global_step}) + "\n")

    return JsonlLogger()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True, help="checkpoints, TensorBoard and tracker.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--fault", default=None, help="a regression: lr_scale:X, grader_drop:P, loss_type:NAME "
                        "or generations:N (see the module doc)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))  # runs go side by side on 2 cores
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    set_seed(args.seed)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    tracker = args.output_dir / "tracker.jsonl"
    tracker.unlink(missing_ok=True)
    fault = parse_fault(args.fault)
    loss_type = fault[1] if fault and fault[0] == "loss_type" else "dapo"
    generations = int(fault_number(fault, 1, 64)) if fault and fault[0] == "generations" else 8
    grader = (dropping_grader(fault_number(fault, 0, 1), args.seed) if fault and fault[0] == "grader_drop"
              else correct_digit)
    tokenizer = build_tokenizer()
    config = GRPOConfig(
        output_dir=str(args.output_dir), seed=args.seed, data_seed=args.seed, max_steps=args.steps,
        learning_rate=LEARNING_RATE * lr_scale(args.fault), lr_scheduler_type="constant", warmup_steps=0,
        per_device_train_batch_size=64, num_generations=generations, max_completion_length=2, temperature=1.0,
        beta=0.0, loss_type=loss_type, logging_steps=1, save_strategy="no", report_to="tensorboard",
        use_cpu=True, bf16=False, disable_tqdm=True,
        dataloader_num_workers=0)
    trainer = GRPOTrainer(model=build_model(tokenizer, args.seed), reward_funcs=grader, args=config,
                          train_dataset=build_dataset(args.seed), processing_class=tokenizer,
                          callbacks=[jsonl_logger(tracker)])
    trainer.train()


if __name__ == "__main__":
    main()
