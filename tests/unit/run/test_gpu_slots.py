"""The GPU slot allocator in one process: aligned blocks, release, usage errors, helpers.

Concurrent holders (real processes) are in tests/integration/run/test_gpu_slots.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.gpu_slots import (
    acquire,
    cuda_visible_devices,
    current_holders,
    slots_dir_for,
)

# A holder process: takes its GPUs, reports them, then holds until told to let go.


def test_prefers_an_aligned_block_over_the_lowest_free(tmp_path: Path) -> None:
    slots = tmp_path / "slots"
    with acquire(1, 4, timeout_s=5, slots_dir=slots) as first:
        assert first == [0]
        with acquire(2, 4, timeout_s=5, slots_dir=slots) as second:
            assert second == [2, 3]
            # No aligned pair is left once GPU 2-3 are held: take what is free.
            with acquire(1, 4, timeout_s=5, slots_dir=slots) as third:
                assert third == [1]


def test_release_on_exit_of_the_block(tmp_path: Path) -> None:
    slots = tmp_path / "slots"
    with acquire(2, 2, timeout_s=5, slots_dir=slots, label="a"):
        assert [h.label for h in current_holders(slots, 2)] == ["a", "a"]
    with acquire(2, 2, timeout_s=5, slots_dir=slots) as again:
        assert again == [0, 1]


def test_more_gpus_than_the_node_has_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs 9 GPUs but this node has 8"):
        with acquire(9, 8, timeout_s=1, slots_dir=tmp_path):
            pass
    with pytest.raises(UsageError, match="must be >= 0"):
        with acquire(-1, 8, timeout_s=1, slots_dir=tmp_path):
            pass


def test_cpu_case_gets_no_gpus_and_takes_no_lock(tmp_path: Path) -> None:
    with acquire(0, 0, timeout_s=1, slots_dir=tmp_path / "slots") as devices:
        assert devices == []
    assert not (tmp_path / "slots").exists()


def test_helpers() -> None:
    assert cuda_visible_devices([4, 5, 6]) == "4,5,6"
    assert slots_dir_for("/r", hostname="node7") == Path("/r/.gpu_slots/node7")
