"""Fixtures of the consistency tests: every scenario's real MSProbe dumps, produced once per session."""

from __future__ import annotations

import pytest

from .scenarios import SCENARIOS, ScenarioRun, collect, perturb_mlp


@pytest.fixture(scope="session")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioRun]:
    """Every scenario's statistics dump, plus a tensor pass narrowed to layers.1.mlp and a run
    whose actor side was fed different tokens."""
    base = tmp_path_factory.mktemp("consistency")
    runs = {name: collect(base / name, mutate) for name, mutate in SCENARIOS.items()}
    runs["mlp_unsynced_tensor"] = collect(
        base / "mlp_unsynced_tensor",
        perturb_mlp,
        task="tensor",
        module_list=("model.layers.1.post_attention_layernorm.", "model.layers.1.mlp."),
    )
    runs["token_mismatch"] = collect(base / "token_mismatch", lambda r: r, actor_token_offset=1)
    return runs
