"""The PPO-clip update's micro-batching: any split of a mini-batch, grouped by response length or not, takes the
same step as one forward; a loss normalised per micro-batch (the ``loss-per-microbatch`` fault) does not once the
micro-batches differ in token count."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.equivalence_faults import LossPerMicrobatch  # noqa: E402
from autotest.workloads.tiny_lm import TinyLMConfig, build_model  # noqa: E402
from autotest.workloads.trainer import OptimConfig, ppo_clip_update  # noqa: E402

PROMPT, WIDTH, ROWS = 4, 6, 8


def _batch():
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, 10, (ROWS, PROMPT + WIDTH), generator=generator)
    lengths = torch.tensor([1, 6, 2, 5, 1, 6, 2, 5])  # micro-batches grouped by length differ in token count
    mask = (torch.arange(WIDTH).unsqueeze(0) < lengths.unsqueeze(1)).float()
    old_logp = -torch.rand(ROWS, WIDTH, generator=generator)
    advantages = torch.randn(ROWS, 1, generator=generator)
    return input_ids, mask, old_logp, advantages


def _step(micro_batch_size: int, *, group_by_length: bool = False, normaliser=None) -> torch.Tensor:
    model = build_model(TinyLMConfig(), seed=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optim = OptimConfig(lr=0.1, clip_eps=0.2, mini_batches=1, micro_batch_size=micro_batch_size, max_grad_norm=1e9)
    input_ids, mask, old_logp, advantages = _batch()
    ppo_clip_update(model, optimizer, optim, input_ids, PROMPT, mask, old_logp, advantages, torch.arange(ROWS),
                    loss_normaliser=normaliser, group_by_length=group_by_length)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_every_split_takes_the_step_of_one_forward():
    whole = _step(ROWS)
    for grouped in (False, True):
        assert torch.allclose(_step(2, group_by_length=grouped), whole, atol=1e-6)


def test_a_loss_normalised_per_micro_batch_moves_the_step_of_length_grouped_micro_batches():
    fault = LossPerMicrobatch(None, 0).loss_normaliser
    assert torch.equal(_step(ROWS, normaliser=fault), _step(ROWS))  # one micro-batch: bitwise the same
    whole = _step(ROWS)
    moved = (_step(2, group_by_length=True, normaliser=fault) - whole).abs().max()
    kept = (_step(2, group_by_length=True) - whole).abs().max()
    assert moved > 100 * max(float(kept), 1e-7), (moved, kept)
