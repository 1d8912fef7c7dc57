"""The attach-point table's contract checks, on wheels made here (the real releases: the slow contract test)."""

from __future__ import annotations

import zipfile

from autotest.attach.rl_autotest_collect import POINTS, AttachPoint, Method
from autotest.consistency.attach_contract import COMMIT, RELEASE, check_wheel, released_points

POINT = AttachPoint("demo-rollout", "demo", "rollout", Method("demo.engine.agent", "Agent.forward"), "model",
                    (Method("demo.engine.agent", "Agent.update"),), "demo==1.0")
GOOD = """
class Agent:
    def forward(self, inputs):
        return self.model(inputs)

    async def update(self, request):
        pass
"""


def _wheel(tmp_path, files):
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_a_release_with_the_points_passes(tmp_path):
    assert check_wheel(_wheel(tmp_path, {"demo/engine/agent.py": GOOD}), [POINT]) == []
    assert check_wheel(_wheel(tmp_path, {"demo/engine/agent/__init__.py": GOOD}), [POINT]) == []


def test_a_moved_point_fails_with_its_name(tmp_path):
    moved = _wheel(tmp_path, {"demo/engine/agent/core.py": GOOD})
    assert check_wheel(moved, [POINT])[0] == ("demo-rollout: demo.engine.agent.Agent.forward: "
                                              "demo-1.0-py3-none-any.whl has no module demo.engine.agent")
    renamed = _wheel(tmp_path, {"demo/engine/agent.py": GOOD.replace("def forward", "def run")})
    assert check_wheel(renamed, [POINT]) == ["demo-rollout: demo.engine.agent.Agent.forward: Agent defines no forward"]
    other_model = _wheel(tmp_path, {"demo/engine/agent.py": GOOD.replace("self.model", "self.runner")})
    assert check_wheel(other_model, [POINT]) == [
        "demo-rollout: demo.engine.agent.Agent.forward: Agent never uses self.model (the model the point wraps)"]


def test_every_point_records_where_it_was_verified():
    """Framework checkouts by commit (xtuner, verl, slime), engines by pinned release (lmdeploy, vLLM, SGLang)."""
    by_framework = {p.framework: p.verified for p in POINTS}
    for framework in ("xtuner", "verl", "slime"):
        assert COMMIT.match(by_framework[framework]), by_framework[framework]
    for framework in ("lmdeploy", "vllm", "sglang"):
        assert RELEASE.match(by_framework[framework]), by_framework[framework]
    assert sorted(released_points()) == ["lmdeploy==0.18.0", "sglang==0.5.23", "vllm==0.34.0"]
    assert {p.side for p in POINTS} == {"actor", "rollout"} and len({p.name for p in POINTS}) == len(POINTS)
