"""The tiny GRPO workload's command line: usage errors are one line, exit 2, and start no run."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.workloads.grpo import main  # noqa: E402


def test_usage_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORK_DIR", raising=False)
    assert main(["--steps", "1"]) == 2
    assert capsys.readouterr().err == "error: --work-dir: missing; pass --work-dir DIR or set WORK_DIR\n"
    assert main(["--work-dir", str(tmp_path), "--fault", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --fault: unknown fault 'nope'")
    assert main(["--work-dir", str(tmp_path), "--rollout-dtype", "fp16"]) == 2
    assert capsys.readouterr().err == "error: --rollout-dtype: must be fp32 or bf16 (got 'fp16')\n"
    bad = tmp_path / "diag.json"
    bad.write_text('{"prompts_per_step": 1}')
    assert main(["--work-dir", str(tmp_path), "--diagnostic-config", str(bad)]) == 2
    assert capsys.readouterr().err == f"error: {bad}: key window_step: missing; set the step to collect, e.g. 3\n"
    assert not list(tmp_path.glob("2*")), "a usage error must not start a run"
