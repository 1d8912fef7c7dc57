"""The GPU check's steps (scripts/gpu_check.sh sets up the Python and calls this): the embedded GRPO workload on
CUDA end to end, through the harness as a GPU runner uses it.

    python3 scripts/gpu_check.py OUT_DIR            # on a machine with one or more CUDA GPUs
    python3 scripts/gpu_check.py OUT_DIR --cpu      # the same flow on the CPU: no slot or GPU probe steps

Steps, each recorded in OUT_DIR/gpu_check.json (ok / failed / skipped, with what was seen); a failed step does not
stop the others, so one run on a lent machine says as much as it can. Exit 0 when no step failed, else 1.

1. environment: torch, its CUDA build, the device, nvidia-smi, the harness's own GPU count, which must be the one
   torch counts (the slot step holds "every GPU" as the harness counts them: an undercount would pass it)
2. slot: the lock-file allocator holds every GPU; a second process asking for one times out naming the holder,
   and gets one as soon as they are released
3. probes: a process holding 2 GiB on GPU 0 is seen by the contention record (other processes, their memory);
   the GPU speed probe times its kernel
4. clean run: tiny-grpo with ``platform.gpus: 1`` and ``RL_AUTOTEST_WORKLOAD_DEVICE=cuda``: the slot, the
   contention snapshots (GPU state, GPU probe), a verdict that is decided (PASS or FAIL, not ERROR), and the
   workload on the GPU as the driver sees it: nvidia-smi, polled while the run goes, lists a workload process
   with memory on the GPU (the workload's own ``device: cuda`` line only echoes the variable this check sets)
5. mismatch fault: the same with ``--fault bf16-rollout`` (the rollout engine in bf16): FAIL on the mismatch gate,
   a consistency request, then ``rl-autotest consistency`` collects MSProbe dumps on CUDA and analyses them
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "autotest.cli"]
FAULT = "bf16-rollout"
SEED = "11"
BURNER = """
import sys, time, torch
held = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda:0")
a = torch.randn(2048, 2048, device="cuda:0")
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    a @ a
    torch.cuda.synchronize()
"""
WAITER = """
import json, sys
from autotest.run.gpu_slots import GpuSlotTimeout, acquire
try:
    with acquire(1, int(sys.argv[2]), float(sys.argv[3]), sys.argv[1], label="gpu-check waiter") as got:
        print(json.dumps({"got": got}))
except GpuSlotTimeout as exc:
    print(json.dumps({"timeout": str(exc)}))
"""


class Check:
    def __init__(self, out: Path, on_cpu: bool) -> None:
        self.out, self.on_cpu = out, on_cpu
        self.steps: list[dict[str, Any]] = []

    def step(self, name: str, body: Callable[[], dict[str, Any]], *, needs_gpu: bool = False) -> None:
        started = time.monotonic()
        if needs_gpu and self.on_cpu:
            record = {"step": name, "status": "skipped", "why": "--cpu: no GPU here"}
        else:
            try:
                record = {"step": name, **body(), "status": "ok"}
            except Exception as exc:  # noqa: BLE001 - every step's failure is recorded, the next step still runs
                record = {"step": name, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:]}
        record["seconds"] = round(time.monotonic() - started, 1)
        self.steps.append(record)
        print(f"gpu-check: {name}: {record['status']} ({record['seconds']} s)"
              + (f" — {record.get('error') or record.get('why')}" if record["status"] != "ok" else ""), flush=True)
        (self.out / "gpu_check.json").write_text(json.dumps(self.steps, indent=2, default=str))


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def environment(on_cpu: bool = False) -> dict[str, Any]:
    import torch

    from autotest.run.platform import detect_gpus

    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False) \
        if shutil_which("nvidia-smi") else None
    seen = {"python": sys.version.split()[0], "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "nvidia_smi": smi.stdout.strip() if smi else None,
            "harness_gpus": detect_gpus().count, "torch_gpus": torch.cuda.device_count()}
    if torch.cuda.is_available():
        seen["device"] = torch.cuda.get_device_name(0)
    if not on_cpu:  # the harness's count (nvidia-smi, or its override) against the CUDA runtime's, two readings
        expect(seen["harness_gpus"] == seen["torch_gpus"],
               f"the harness counts {seen['harness_gpus']} GPUs ({detect_gpus().source}), torch sees "
               f"{seen['torch_gpus']}: the slot step would hold the harness's count, not the node's")
    return seen


def shutil_which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def slot(out: Path) -> dict[str, Any]:
    from autotest.run.gpu_slots import acquire, current_holders
    from autotest.run.platform import detect_gpus

    total = detect_gpus().count
    expect(total >= 1, f"the harness counts {total} GPUs")
    slots = out / "slots"
    waiter = [sys.executable, "-c", WAITER, str(slots), str(total), "2"]
    with acquire(total, total, 30, slots, label="gpu-check holder") as held:
        holders = current_holders(slots, total)
        expect(sorted(h.gpu for h in holders) == held and all(h.pid == os.getpid() for h in holders),
               f"holders {holders} are not this process on {held}")
        blocked = json.loads(subprocess.run(waiter, capture_output=True, text=True, check=True).stdout)
    expect("timeout" in blocked and "gpu-check holder" in blocked["timeout"],
           f"a second process asking while every GPU is held: {blocked}")
    freed = json.loads(subprocess.run(waiter, capture_output=True, text=True, check=True).stdout)
    expect(freed.get("got") == [0], f"after release: {freed}")
    return {"gpus": total, "held": held, "blocked": blocked["timeout"], "after_release": freed["got"]}


def probes() -> dict[str, Any]:
    from autotest.run.gpu_state import gpu_probe, gpu_state

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    burner = subprocess.Popen([sys.executable, "-c", BURNER, "60"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        expect(burner.stdout is not None and burner.stdout.readline().strip() == "ready", "the burner did not start")
        time.sleep(1)
        state = gpu_state(env, ours={os.getpid()})
        probe = gpu_probe(env)
    finally:
        burner.kill()
        burner.wait()
    expect(state is not None and state["gpus"], f"gpu_state saw no GPU: {state}")
    others = state["other_processes"]
    expect(any((a.get("memory_mib") or 0) >= 1500 for a in others),
           f"the 2 GiB burner (pid {burner.pid}) is not among the other processes: {others}")
    expect("wall_s" in probe, f"the GPU probe did not time its kernel: {probe}")
    return {"gpu_state": state, "burner_pid": burner.pid, "probe": probe}


def case_file(out: Path, on_cpu: bool) -> Path:
    """tiny-grpo as a one-GPU case whose workload computes on CUDA (the packaged case, two keys changed)."""
    import yaml

    case = yaml.safe_load((ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text())
    case["platform"]["gpus"] = 0 if on_cpu else 1
    if not on_cpu:
        case["markers"] = [*case["markers"], "gpu"]  # a case with GPUs carries the gpu marker
    case["launch"].setdefault("env", {})["RL_AUTOTEST_WORKLOAD_DEVICE"] = "cpu" if on_cpu else "cuda"
    case["baseline"] = str(ROOT / "baselines" / "tiny-grpo.yaml")
    path = out / "case" / "tiny-grpo.yaml"  # a case's name is its file's
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    return path


def run_case(case: Path, results: Path, *more: str) -> tuple[int, Path, dict[str, Any]]:
    argv = [*CLI, "run", str(case), "--yes", "--seed", SEED, "--results-dir", str(results), "--no-history", *more]
    log = results.parent / f"{results.name}.log"
    with log.open("w") as sink:
        done = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, timeout=400, check=False)
    folders = sorted(p.parent for p in results.glob("*/*/results.json"))
    expect(bool(folders), f"`{shlex.join(argv)}` exited {done.returncode} and left no results.json (see {log})")
    return done.returncode, folders[-1], json.loads((folders[-1] / "results.json").read_text())


def on_device(folder: Path, device: str) -> bool:
    """The workload's own word: its log says ``device: <device>`` (an echo of the variable the case sets)."""
    return any(f"device: {device})" in p.read_text(errors="replace") for p in folder.rglob("*stdout*") if p.is_file())


class GpuWatch:
    """What the driver sees while a run goes: nvidia-smi's compute processes on the GPUs, polled on a thread, each
    with its largest memory and its command line (read from /proc while it lives). The evidence that the
    workload computed on the GPU comes from here, not from what the workload says about itself."""

    def __init__(self, environ: dict[str, str] | None = None, interval_s: float = 0.5) -> None:
        import threading

        self.environ = dict(os.environ if environ is None else environ)
        self.interval_s = interval_s
        self.seen: dict[int, dict[str, Any]] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-watch", daemon=True)

    def __enter__(self) -> "GpuWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from autotest.run.gpu_state import gpu_state

        while True:
            state = gpu_state(self.environ, ours={os.getpid()})
            self.polls += 1
            for app in (state or {}).get("other_processes", ()):
                entry = self.seen.setdefault(app["pid"], {"pid": app["pid"], "memory_mib": 0.0,
                                                          "command": _command_line(app["pid"])})
                entry["memory_mib"] = max(entry["memory_mib"], app.get("memory_mib") or 0.0)
            if self._stop.wait(self.interval_s):
                return


def _command_line(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None  # gone, or in another PID namespace


def workload_on_gpu(seen: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The processes the driver listed with memory whose command line is an embedded workload's."""
    return [e for e in seen.values() if (e["memory_mib"] or 0) > 0 and "autotest.workloads" in (e["command"] or "")]


def device_evidence(folder: Path, device: str, watch: GpuWatch | None) -> dict[str, Any]:
    """The workload ran on ``device``: on the CPU its log's word is all there is; on a GPU the driver must have
    listed a workload process with memory on it while the run went (``watch``)."""
    said = on_device(folder, device)
    expect(said, f"the workload's log does not say `device: {device}` ({folder})")
    if watch is None:
        return {"workload_says": device}
    found = workload_on_gpu(watch.seen)
    listed = sorted(watch.seen.values(), key=lambda e: e["pid"])
    unreadable = [e["pid"] for e in listed if e["command"] is None and (e["memory_mib"] or 0) > 0]
    expect(bool(found), f"the workload's log says `device: {device}`, but nvidia-smi listed no workload process "
           f"with memory on the GPU in {watch.polls} polls during the run (it listed: {listed or 'nothing'})"
           + (f"; the command lines of pids {unreadable} cannot be read here (another PID namespace?), so what "
              "the driver saw cannot be tied to the workload" if unreadable else "; the workload computed elsewhere"))
    return {"workload_says": device, "driver_saw": found}


def clean_run(out: Path, case: Path, on_cpu: bool) -> dict[str, Any]:
    if on_cpu:
        watch = None
        code, folder, results = run_case(case, out / "clean")
    else:
        with GpuWatch() as watch:
            code, folder, results = run_case(case, out / "clean")
    status = results.get("status") or results.get("verdict", {}).get("status")
    expect(status in ("PASS", "FAIL"), f"the verdict is {status} (exit {code}); see {folder}/report.md")
    device = device_evidence(folder, "cpu" if on_cpu else "cuda", watch)
    preflight = json.loads((folder / "preflight.json").read_text())
    seen = {"exit": code, "verdict": status, "folder": str(folder), "device": device}
    if not on_cpu:
        text = json.dumps(preflight) + json.dumps(results)
        expect('"gpu"' in text and '"wall_s"' in text, "no GPU state or GPU probe in preflight.json/results.json")
        seen["machine_before"] = preflight.get("machine") or preflight.get("contention")
    return seen


def mismatch_fault(out: Path, case: Path) -> dict[str, Any]:
    code, folder, results = run_case(case, out / "fault", "--fault", FAULT)
    status = results.get("status") or results.get("verdict", {}).get("status")
    expect(status == "FAIL", f"--fault {FAULT}: the verdict is {status}, not FAIL ({folder})")
    request = folder / "consistency_request.json"
    expect(request.is_file(), f"no consistency request in {folder}")
    argv = [*CLI, "consistency", str(folder)]
    log = out / "consistency.log"
    with log.open("w") as sink:
        job = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, timeout=400, check=False)
    tail = log.read_text(errors="replace")[-1500:]
    expect(job.returncode == 0, f"`{shlex.join(argv)}` exited {job.returncode}:\n{tail}")
    return {"verdict": status, "folder": str(folder), "consistency_exit": job.returncode, "consistency_tail": tail}


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or any(a not in ("--cpu",) for a in argv[1:]):
        print("usage: gpu_check.py OUT_DIR [--cpu]", file=sys.stderr)
        return 2
    out, on_cpu = Path(argv[0]).resolve(), "--cpu" in argv
    out.mkdir(parents=True, exist_ok=True)
    check = Check(out, on_cpu)
    check.step("environment", lambda: environment(on_cpu))
    check.step("slot", lambda: slot(out), needs_gpu=True)
    check.step("probes", probes, needs_gpu=True)
    case = case_file(out, on_cpu)
    check.step("clean run", lambda: clean_run(out, case, on_cpu))
    check.step("mismatch fault", lambda: mismatch_fault(out, case))
    failed = [s["step"] for s in check.steps if s["status"] == "failed"]
    print(f"gpu-check: {'FAILED: ' + ', '.join(failed) if failed else 'every step ok'} ({out / 'gpu_check.json'})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
