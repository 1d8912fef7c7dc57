"""The workload's device switch: the CPU unchanged (the same random streams), a bad value one line, CUDA refused
where torch has none (the GPU check, scripts/gpu_check.sh, runs the CUDA side)."""

from __future__ import annotations

import pytest
import torch

from autotest.errors import UsageError
from autotest.workloads.device import ENV, generator, use_device, workload_device


@pytest.mark.parametrize("value, device", [(None, "cpu"), ("", "cpu"), (" cpu ", "cpu"), ("cuda", "cuda"),
                                           ("cuda:1", "cuda:1")])
def test_the_device_names_it_accepts(value, device) -> None:
    assert workload_device({} if value is None else {ENV: value}) == device


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "cpu:0", "mps", "cuda:"])
def test_any_other_device_is_one_line_naming_the_variable(value) -> None:
    with pytest.raises(UsageError, match=rf"\${ENV}="):
        workload_device({ENV: value})


def test_on_the_cpu_the_streams_are_the_ones_the_baselines_were_calibrated_on() -> None:
    use_device("cpu")
    ours, plain = generator(7), torch.Generator().manual_seed(7)
    assert ours.device.type == "cpu"
    assert torch.equal(torch.rand(16, generator=ours), torch.rand(16, generator=plain))
    assert torch.equal(torch.multinomial(torch.ones(5), 3, generator=ours),
                       torch.multinomial(torch.ones(5), 3, generator=plain))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: scripts/gpu_check.sh runs it there")
def test_cuda_without_a_cuda_torch_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match="sees no CUDA device"):
        use_device("cuda")
    assert torch.get_default_device().type == "cpu"
