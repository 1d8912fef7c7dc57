"""What the contention sampler reads: /proc/stat, nvidia-smi's answers, and the summary of its samples."""

from __future__ import annotations

import os

from autotest.run.contention import (
    ContentionRecord,
    Sample,
    cpu_ticks,
    machine_probe,
    summarise,
    thread_times,
)
from autotest.run.gpu_state import parse_compute_apps, parse_gpu_rows, visible_gpu_indices


def test_cpu_ticks_count_steal_as_busy_and_iowait_as_idle():
    assert cpu_ticks("cpu  100 5 20 1000 30 1 2 40 0 0\ncpu0 1 2 3\n") == (168, 1198, 40)
    assert cpu_ticks("intr 1 2\n") is None


def test_this_process_threads_are_read_from_schedstat():
    times = thread_times([os.getpid()])
    assert times and all(cpu >= 0 and delay >= 0 for cpu, delay in times.values())
    assert thread_times([2 ** 22 + 7]) == {}  # no such process: nothing, no error


def test_nvidia_smi_rows_name_the_slowing_throttle_reasons_and_skip_what_is_not_a_number():
    rows = parse_gpu_rows("0, GPU-aaa, 1410, 1980, 0x0000000000000080, 97, 70000\n"
                          "1, GPU-bbb, [N/A], 1980, 0x0000000000000004, 0, 10\nnot a row\n")
    assert rows[0]["slowing_throttle_reasons"] == ["hw_thermal"] and rows[0]["sm_clock_mhz"] == 1410.0
    assert rows[1]["slowing_throttle_reasons"] == [] and rows[1]["sm_clock_mhz"] is None  # SW power cap: ordinary
    assert parse_compute_apps("GPU-aaa, 4242, 30000\nNo running processes found\n") == [
        {"gpu_uuid": "GPU-aaa", "pid": 4242, "memory_mib": 30000.0}]
    assert visible_gpu_indices({"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert visible_gpu_indices({}) is None


def test_the_probe_reports_its_cpu_and_wall_time():
    probe = machine_probe()
    assert probe["device"] == "cpu" and 0 < probe["cpu_s"] <= probe["wall_s"] * 1.05


def test_the_summary_is_the_share_of_runnable_time_spent_waiting():
    samples = [Sample(0.0, 0.0, 0.0, 1, None, 1.0), Sample(10.0, 2.0, 6.0, 1, 0.8, 3.0)]
    assert summarise(samples) == {"span_s": 10.0, "cpu_s": 2.0, "run_delay_s": 6.0, "run_delay_share": 0.75,
                                  "load_per_core_mean": 2.0, "load_per_core_max": 3.0, "others_cpu_share_mean": 0.8}
    assert summarise(samples[:1]) == {}
    assert ContentionRecord(samples=tuple(samples)).to_dict()["during"]["run_delay_share"] == 0.75
