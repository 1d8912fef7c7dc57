"""The tiny model and digit tokenizer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.tiny_lm import (  # noqa: E402
    DigitTokenizer,
    TinyLMConfig,
    build_model,
    response_logprobs,
)


def test_tokenizer_round_trip_and_ids() -> None:
    tok = DigitTokenizer()
    ids = tok.encode("<bos>S07=3<eos>")
    assert ids == [tok.bos_id, tok.token_id("S"), 0, 7, tok.token_id("="), 3, tok.eos_id]
    assert tok.decode(ids) == "<bos>S07=3<eos>"
    assert tok.vocab_size == 16
    assert all(tok.is_digit(i) for i in range(10)) and not tok.is_digit(tok.eos_id)
    with pytest.raises(ValueError):
        tok.encode("x")


def test_model_is_tiny_qwen3_and_seeded() -> None:
    a = build_model(TinyLMConfig(), seed=5)
    b = build_model(TinyLMConfig(), seed=5)
    c = build_model(TinyLMConfig(), seed=6)
    assert type(a).__name__ == "Qwen3ForCausalLM"
    assert 60_000 < sum(p.numel() for p in a.parameters()) < 90_000
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    name = "model.layers.0.mlp.up_proj.weight"
    assert torch.equal(pa[name], pb[name]) and not torch.equal(pa[name], pc[name])


def test_building_a_model_does_not_move_the_global_rng() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_model(TinyLMConfig(), seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_response_logprobs_are_logsoftmax_of_next_token() -> None:
    model = build_model(TinyLMConfig(), seed=0).eval()
    ids = torch.tensor([[10, 14, 0, 5, 13, 5, 11], [10, 14, 0, 3, 13, 1, 2]])
    with torch.no_grad():
        logp, entropy = response_logprobs(model, ids, prompt_len=5)
        logits = model(input_ids=ids).logits.float()
    want = logits.log_softmax(-1)[:, 4:6].gather(-1, ids[:, 5:].unsqueeze(-1)).squeeze(-1)
    assert logp.shape == (2, 2) and torch.allclose(logp, want)
    assert bool((entropy > 0).all()) and bool((entropy <= torch.log(torch.tensor(16.0)) + 1e-5).all())
