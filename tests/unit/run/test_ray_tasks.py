"""The Ray task dispatch's pure parts: resource flags, the feasibility check, the attempt trail, the bisect flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.ray_tasks import ATTEMPTS_FILE, attempts, missing_resources, parse_resources
from tests.helpers import run_cli


def test_resources_parse_name_equals_amount():
    assert parse_resources(["probe=1", "big_node=0.5"]) == {"probe": 1.0, "big_node": 0.5}
    assert parse_resources([]) == {}


@pytest.mark.parametrize("value,message", [
    ("probe", "--ray-resource 'probe': give NAME=AMOUNT, e.g. --ray-resource probe=1"),
    ("=1", "--ray-resource '=1': give NAME=AMOUNT"),
    ("probe=x", "--ray-resource 'probe=x': 'x' is not a number"),
    ("probe=0", "--ray-resource 'probe=0': the amount must be above 0"),
    ("probe=nan", "--ray-resource 'probe=nan': the amount must be above 0"),
    ("GPU=1", "--ray-resource 'GPU=1': GPU is Ray's own resource and follows from the case"),
])
def test_a_bad_resource_is_one_line(value, message):
    with pytest.raises(UsageError) as caught:
        parse_resources([value])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_run_needs_one_node_with_everything_it_asks_for():
    nodes = [{"CPU": 1.0, "probe": 1.0, "node:127.0.0.1": 1.0, "memory": 1e9},
             {"CPU": 2.0, "GPU": 1.0, "object_store_memory": 1e8}]
    assert missing_resources({"CPU": 1.0, "probe": 1.0}, nodes) is None
    assert missing_resources({"CPU": 1.0, "GPU": 1.0}, nodes) is None
    # probe on one node and the GPU on the other is not one node
    line = missing_resources({"CPU": 1.0, "GPU": 1.0, "probe": 1.0}, nodes)
    assert line == "no node offers CPU=1, GPU=1, probe=1 (the nodes offer: CPU=1, probe=1; CPU=2, GPU=1)"
    assert missing_resources({"probe": 1.0}, []) == "no node offers probe=1 (the nodes offer: no live node)"


def test_the_attempt_trail_is_read_oldest_first(tmp_path: Path):
    assert attempts(tmp_path) == []
    (tmp_path / ATTEMPTS_FILE).write_text(json.dumps({"node_id": "a"}) + "\n" + json.dumps({"node_id": "b"}) + "\n")
    assert [a["node_id"] for a in attempts(tmp_path)] == ["a", "b"]


@pytest.mark.parametrize("argv,message", [
    (["--ray-resource", "probe=1"], "--ray-resource: needs --ray-jobs or --ray-tasks (the cluster whose nodes "
                                    "offer it)"),
    (["--ray-tasks", "local", "--ray-resource", "probe"], "--ray-resource 'probe': give NAME=AMOUNT"),
])
def test_bisect_ray_flags_are_checked_before_anything_runs(argv, message, capsys, tmp_path: Path):
    assert run_cli("bisect", "tiny-grpo", "--good", "a", "--bad", "b", "--results-dir", str(tmp_path), *argv) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and message in out[0]


@pytest.mark.parametrize("argv,message", [
    (["--ray-resource", "probe=1"], "--ray-resource: needs --ray-jobs (the cluster whose nodes offer it)"),
    (["--ray-jobs", "http://127.0.0.1:1", "--ray-resource", "GPU=1"], "--ray-resource 'GPU=1': GPU is Ray's own"),
])
def test_run_ray_flags_are_checked_before_anything_runs(argv, message, capsys, tmp_path: Path):
    assert run_cli("run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(tmp_path), *argv) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and message in out[0]
    assert not any(tmp_path.iterdir())  # nothing made, nothing launched
