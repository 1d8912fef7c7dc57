"""Device-seconds: wall x GPUs on a GPU case, wall x cores on CPU; sums for replicates, calibration and bisect."""

from __future__ import annotations

from autotest.report.cost import CPU, GPU, cores_used, format_device_seconds, run_cost, summed, total_device_seconds


def test_a_gpu_run_costs_wall_times_its_gpus():
    cost = run_cost(8, 100.0, {"OMP_NUM_THREADS": "16"})
    assert (cost.device, cost.devices, cost.device_seconds) == (GPU, 8.0, 800.0)
    assert cost.to_dict() == {"device_seconds": 800.0, "wall_s": 100.0, "devices": 8.0, "device": GPU}


def test_a_cpu_run_costs_wall_times_the_cores_it_held():
    assert run_cost(0, 90.0, {}).device_seconds == 90.0  # one thread: the embedded workloads' cap
    assert run_cost(0, 90.0, {"OMP_NUM_THREADS": "2"}).device_seconds == 180.0
    assert run_cost(0, 90.0, {"RL_AUTOTEST_CORES": "4", "OMP_NUM_THREADS": "2"}).device_seconds == 360.0
    assert run_cost(0, None, {}).device_seconds == 0.0  # a run that never started
    assert run_cost(0, 10.0, {}).device == CPU


def test_unreadable_core_counts_fall_back_to_one():
    assert cores_used({"OMP_NUM_THREADS": "many"}) == 1.0
    assert cores_used({"RL_AUTOTEST_CORES": "0", "OMP_NUM_THREADS": "3"}) == 3.0


def test_several_runs_sum():
    costs = [run_cost(0, 10.0, {}).to_dict(), None, run_cost(0, 20.5, {}).to_dict()]
    assert total_device_seconds(costs) == 30.5
    assert summed(costs) == {"device_seconds": 30.5, "runs": 2, "wall_s": 30.5, "device": CPU}
    assert format_device_seconds(7200.0) == "7200.0 device-s (2.00 device-h)"
