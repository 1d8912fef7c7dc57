"""Device-seconds: wall x GPUs on a GPU case, the measured CPU time (else wall x cores) on CPU; sums for
replicates, calibration and bisect."""

from __future__ import annotations

from autotest.report.cost import CORE_SECONDS, CPU, CPU_SECONDS, GPU, GPU_SECONDS, cores_used, format_device_seconds, run_cost, summed, total_device_seconds


def test_a_gpu_run_costs_wall_times_its_gpus():
    cost = run_cost(8, 100.0, {"OMP_NUM_THREADS": "16"})
    assert (cost.device, cost.devices, cost.device_seconds) == (GPU, 8.0, 800.0)
    assert cost.to_dict() == {"device_seconds": 800.0, "wall_s": 100.0, "devices": 8.0, "device": GPU,
                              "basis": GPU_SECONDS, "quantity": "GPU-seconds: wall 100.0 s x 8 GPUs"}
    assert run_cost(8, 100.0, {}, cpu_s=3.0).device_seconds == 800.0  # GPUs are held whatever the CPUs did


def test_a_measured_cpu_run_costs_its_process_trees_cpu_time():
    cost = run_cost(0, 90.0, {"OMP_NUM_THREADS": "2"}, cpu_s=47.26)
    assert (cost.basis, cost.device_seconds) == (CPU_SECONDS, 47.26)
    assert cost.to_dict()["cpu_s"] == 47.26
    assert run_cost(0, 2.3, {}, cpu_s=0.0362).device_seconds == 0.036  # a mostly idle run is not rounded to 0
    assert cost.quantity.startswith("CPU-seconds: CPU time of the run's process tree")
    assert run_cost(0, 90.0, {}).basis == CORE_SECONDS  # not measured: the cores held, said so
    assert "not measured" in run_cost(0, 90.0, {}).quantity


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
    assert summed(costs) == {"device_seconds": 30.5, "runs": 2, "wall_s": 30.5, "device": CPU,
                             "basis": CORE_SECONDS, "quantity": "core-seconds summed over 2 run(s)"}
    assert "basis" not in summed([{"device_seconds": 4.0}])  # costs recorded before bases
    assert format_device_seconds(7200.0) == "7200.0 device-s (2.00 device-h)"
