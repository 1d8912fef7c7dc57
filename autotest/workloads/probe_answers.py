"""The teacher probe's recorded answers: log-probs scored once from a fixture's weights, kept beside the fixture.

    python -m autotest.workloads.probe_answers [FIXTURE_DIR]

writes ``FIXTURE_DIR/probe_answers.json`` (default: the committed fixture): run it after
``python -m autotest.workloads.teachers --refresh-committed`` (a unit test fails while the answers are stale; a
cached fixture without them is scored when a launch first reads it).

The answers are computed by :func:`qwen3_logprobs`, a plain-torch forward of the Qwen3 layout read straight
from ``model.safetensors`` (embedding, RMSNorm, q/k norms, rotary positions, grouped-query causal attention,
SwiGLU, tied head). It never goes through ``transformers`` or the teacher server's ``Teacher`` class: a probe
whose reference is scored by the serving code cannot tell a server with the wrong weights (its reference is
scored from the same wrong weights) nor a bug the serving code shares with itself. Each teacher's entry carries
the sha256 of the weights it was scored from; the launcher refuses answers recorded from other weights.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.tasks import get_task

ANSWERS_FILE = "probe_answers.json"
REGENERATE = "python -m autotest.workloads.probe_answers FIXTURE_DIR"

#: fixed probe sequences per teacher (the first training targets of its domain)
PROBE_PROMPTS = 4


def probe_sequences(domain: str, count: int = PROBE_PROMPTS) -> list[list[int]]:
    """``count`` fixed sequences of ``domain``: a prompt, a correct answer, ``<eos>``."""
    from autotest.workloads.teachers import correct_pairs
    from autotest.workloads.tiny_lm import DigitTokenizer

    task = get_task(domain)
    eos = DigitTokenizer().eos_id
    return [list(task.prompt(t).token_ids) + list(correct_pairs(task, t)[0]) + [eos]
            for t in task.train_targets[:count]]


def qwen3_logprobs(checkpoint: Path, sequences: Sequence[Sequence[int]], temperature: float = 1.0
                   ) -> list[list[float]]:
    """log p(token j+1 | tokens 0..j) of each sequence under ``checkpoint``'s weights, in fp32, by plain torch
    (of the logits over ``temperature``: the reference a server scoring at another temperature is held to)."""
    import torch
    from safetensors.torch import load_file

    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    w = load_file(str(checkpoint / "model.safetensors"))
    heads, kv_heads, head_dim = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    eps = float(config["rms_norm_eps"])
    theta = float((config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta", 10000.0)))
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])  # tied in the fixture's config

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + turned * sin

    out: list[list[float]] = []
    with torch.no_grad():
        for seq in sequences:  # one at a time: no padding to reason about
            ids = torch.tensor(list(seq))
            n = len(ids)
            inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
            angles = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
            cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
            mask = torch.full((n, n), float("-inf")).triu(1)
            x = w["model.embed_tokens.weight"][ids]
            for layer in range(config["num_hidden_layers"]):
                p = f"model.layers.{layer}."
                h = rms(x, w[p + "input_layernorm.weight"])
                q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, heads, head_dim)
                k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, kv_heads, head_dim)
                v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, kv_heads, head_dim)
                q = rotate(rms(q, w[p + "self_attn.q_norm.weight"]), cos[:, None], sin[:, None])
                k = rotate(rms(k, w[p + "self_attn.k_norm.weight"]), cos[:, None], sin[:, None])
                k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
                scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(head_dim) + mask
                attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, heads * head_dim)
                x = x + attn @ w[p + "self_attn.o_proj.weight"].T
                h = rms(x, w[p + "post_attention_layernorm.weight"])
                gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
                x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
            logits = rms(x, w["model.norm.weight"]) @ head.T
            logp = (logits if temperature == 1.0 else logits / temperature).log_softmax(-1)
            out.append(logp[:-1].gather(-1, ids[1:, None]).squeeze(-1).tolist())
    return out


def record_answers(root: Path, domains: Sequence[str]) -> dict[str, Any]:
    """Score each teacher of the fixture at ``root`` on its probe sequences; write ``root/probe_answers.json``."""
    from autotest.workloads.teachers import teacher_name, weights_digest

    teachers: dict[str, Any] = {}
    for domain in domains:
        checkpoint = root / teacher_name(domain)
        sequences = probe_sequences(domain)
        teachers[teacher_name(domain)] = {"domain": domain, "weights_sha256": weights_digest(checkpoint),
                                          "token_ids": sequences, "logprobs": qwen3_logprobs(checkpoint, sequences)}
    data = {"scored_by": "autotest.workloads.probe_answers.qwen3_logprobs (plain torch, from model.safetensors)",
            "teachers": teachers}
    (root / ANSWERS_FILE).write_text(json.dumps(data) + "\n", encoding="utf-8")
    return data


def recorded_answers(root: Path, weights: dict[str, str], domains: Sequence[str]) -> dict[str, Any]:
    """The answers recorded beside the fixture at ``root``, checked against its weights (``name -> sha256``)
    and today's probe sequences; a ``UsageError`` line naming the fix when they are missing or stale."""
    from autotest.workloads.teachers import teacher_name

    path = root / ANSWERS_FILE
    try:
        teachers = json.loads(path.read_text(encoding="utf-8"))["teachers"]
        for domain in domains:
            entry = teachers[teacher_name(domain)]
            if entry["weights_sha256"] != weights.get(teacher_name(domain)):
                raise UsageError(f"{path}: {teacher_name(domain)}: recorded from other weights "
                                 f"(sha256 {str(entry['weights_sha256'])[:12]}, the fixture holds "
                                 f"{str(weights.get(teacher_name(domain)))[:12]}); regenerate with {REGENERATE}")
            if entry["token_ids"] != probe_sequences(domain) or not isinstance(entry["logprobs"], list):
                raise UsageError(f"{path}: {teacher_name(domain)}: recorded for other probe sequences; "
                                 f"regenerate with {REGENERATE}")
        return teachers
    except UsageError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: no recorded teacher probe answers ({type(exc).__name__}: {exc}); "
                         f"regenerate with {REGENERATE}") from None


def check_weights(recorded: Mapping[str, str], on_disk: Mapping[str, str], root: Path) -> None:
    """The weights on disk are the ones ``fixture.json`` recorded when the fixture was made (``name -> sha256``);
    a ``UsageError`` line naming the first that is not (an edited, half-copied or swapped checkpoint)."""
    for name, digest in on_disk.items():
        if recorded.get(name) != digest:
            raise UsageError(f"{root}: {name}/model.safetensors (sha256 {digest[:12]}) is not the checkpoint "
                             f"fixture.json recorded (sha256 {str(recorded.get(name))[:12]}); restore it "
                             "(git checkout) or regenerate with python -m autotest.workloads.teachers "
                             "--refresh-committed")


def main(argv: Sequence[str]) -> int:
    from autotest.workloads.teachers import COMMITTED_DIR, open_fixture

    root = Path(argv[0]) if argv else COMMITTED_DIR
    try:
        fixture = open_fixture(root)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = record_answers(fixture.root, fixture.domains)
    print(f"[probe-answers] {root / ANSWERS_FILE}: "
          + ", ".join(f"{name} ({len(t['logprobs'])} sequences)" for name, t in data["teachers"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
