"""``--ab-if-environment-changed`` as the plugin wires it: the golden's recorded environment against this machine's,
and the last trusted passing commit read from a real SQLite history of recorded results folders."""

from __future__ import annotations

import yaml

from autotest.history.database import sqlite_url
from autotest.history.store import record_results
from autotest.inputs.case import load_case
from autotest.plugin import environment_fallback_of
from tests.helpers import ROOT
from tests.unit.history.builders import REWARDS, STEP_TIME, write_results_folder

CASE = "grpo-gsm8k-qwen3-8b-lmdeploy"  # names xtuner as its framework


def _case_with_golden_environment(tmp_path, environment):
    """The packaged framework case, its baseline a copy of tiny-grpo's recording ``environment``."""
    spec = yaml.safe_load((ROOT / "baselines" / "tiny-grpo.yaml").read_text())
    spec["provenance"]["environment"] = environment
    (tmp_path / "golden.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    case = yaml.safe_load((ROOT / "autotest" / "cases" / f"{CASE}.yaml").read_text())
    case["baseline"] = str(tmp_path / "golden.yaml")
    (tmp_path / f"{CASE}.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    return load_case(tmp_path / f"{CASE}.yaml")


def _history(tmp_path, monkeypatch):
    url = sqlite_url(tmp_path / "history.sqlite")
    for night, rewards, sha in ((1, 0.1, "a" * 40), (2, 0.1, "b" * 40), (3, 0.5, "c" * 40)):  # PASS, PASS, FAIL
        record_results(write_results_folder(tmp_path / "results", CASE, night, {REWARDS: rewards, STEP_TIME: 0.3},
                                            sha=sha), url)
    monkeypatch.setenv("RL_AUTOTEST_HISTORY", url)


def test_a_golden_from_another_torch_is_judged_against_the_last_trusted_commit(tmp_path, monkeypatch, pytestconfig):
    _history(tmp_path, monkeypatch)
    case = _case_with_golden_environment(tmp_path, {"python": "3.11.7", "packages": {"torch": "1.0.0"}})
    fallback = environment_fallback_of(pytestconfig, case)
    assert fallback is not None and fallback.base_sha == "b" * 40
    assert any(c.startswith("torch 1.0.0 -> ") for c in fallback.changes)


def test_a_golden_from_this_environment_keeps_the_golden_gate(tmp_path, monkeypatch, pytestconfig):
    from autotest.run.preflight import environment_fingerprint, framework_environment

    _history(tmp_path, monkeypatch)
    case = _case_with_golden_environment(tmp_path, {})
    today = {**environment_fingerprint(), "framework": framework_environment(case)}
    case = _case_with_golden_environment(tmp_path, today)
    assert environment_fallback_of(pytestconfig, case) is None
