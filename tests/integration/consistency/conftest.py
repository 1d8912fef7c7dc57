"""Fixtures of the consistency tests: every scenario's real MSProbe dumps, produced once per session
(xdist workers included: the first worker builds them under a file lock, the others read them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared_build import content_key, shared_build

from . import scenarios
from .scenarios import SCENARIOS, ScenarioRun, collect, perturb_mlp, scenario_run

#: the tests only read these dumps (a test that changes one copies it to its own tmp_path first)
TENSOR_MODULES = ("model.layers.1.post_attention_layernorm.", "model.layers.1.mlp.")
EXTRA = ("mlp_unsynced_tensor", "token_mismatch")


def _build(base: Path) -> None:
    for name, mutate in SCENARIOS.items():
        collect(base / name, mutate)
    collect(base / "mlp_unsynced_tensor", perturb_mlp, task="tensor", module_list=TENSOR_MODULES)
    collect(base / "token_mismatch", lambda r: r, actor_token_offset=1)


@pytest.fixture(scope="session")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioRun]:
    """Every scenario's statistics dump, plus a tensor pass narrowed to layers.1.mlp and a run
    whose actor side was fed different tokens."""
    key = content_key(sorted(SCENARIOS), TENSOR_MODULES, EXTRA, files=(Path(scenarios.__file__),))
    base = shared_build(tmp_path_factory, "consistency-scenarios", key, _build)
    return {name: scenario_run(base / name) for name in (*SCENARIOS, *EXTRA)}
