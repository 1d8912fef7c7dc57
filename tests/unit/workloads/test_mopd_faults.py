"""The MOPD fault catalogue covers every fault the launcher takes; each fault's verdict through the
harness is in tests/integration/workloads/test_mopd_faults.py."""

from __future__ import annotations

from autotest.workloads.mopd import TRAINING_FAULTS  # noqa: E402
from autotest.workloads.mopd_launch import FAULTS, TEACHER_FAULTS  # noqa: E402


def test_the_catalogue_covers_every_fault_the_launcher_takes() -> None:
    assert set(FAULTS) == set(TEACHER_FAULTS + TRAINING_FAULTS)
