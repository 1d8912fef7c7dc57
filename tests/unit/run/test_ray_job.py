"""Ray job submission, the parts that need no Ray head: exit codes, address forms, refusals."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.launch import LaunchSpec
from autotest.run.ray_job import exit_code_of, normalize_address, submit


def py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", textwrap.dedent(code))


def spec_for(tmp_path: Path, code: str, **kw: object) -> LaunchSpec:
    base: dict = {"command": py(code), "cwd": tmp_path, "env": {}, "timeout_s": 60.0}
    return LaunchSpec(**{**base, **kw})


def run_dir(tmp_path: Path, case: str = "unit-case") -> Path:
    return tmp_path / "results" / case / "20260101-000000-pid1"


# ---------------------------------------------------------------- without a cluster


def test_exit_code_comes_from_the_driver_code_or_the_message() -> None:
    assert exit_code_of("SUCCEEDED", "Job finished successfully.", None) == (0, None)
    assert exit_code_of("FAILED", "Job entrypoint command failed with exit code 7, last logs", None) == (7, None)
    assert exit_code_of("FAILED", "runtime env setup failed", None) == (1, None)
    assert exit_code_of("FAILED", "failed with exit code 7", 5) == (5, None)
    assert exit_code_of("FAILED", "failed with exit code -9", None) == (None, "SIGKILL")
    assert exit_code_of("STOPPED", "Job was intentionally stopped.", None) == (None, None)


def test_address_forms() -> None:
    assert normalize_address("127.0.0.1:8265") == "http://127.0.0.1:8265"
    assert normalize_address("http://head:8265/") == "http://head:8265"
    assert normalize_address("ray://head:10001") == "ray://head:10001"
    with pytest.raises(UsageError, match="^ray address: empty"):
        normalize_address(" ")


def test_a_case_that_starts_its_own_ray_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^launch.uses_ray: .*ray stop --force"):
        submit(spec_for(tmp_path, "print(1)", uses_ray=True), run_dir(tmp_path), address="http://127.0.0.1:1")


# ---------------------------------------------------------------- against the local head


# ---------------------------------------------------------------- the tiny case end to end
