"""The tiny-mopd launch script: teacher servers up, training, everything down again.

    python -m autotest.workloads.mopd_launch --work-dir DIR [--seed N] [--fault NAME[:ARG]]
        [--fixture DIR] [--replicas 1] [--ready-timeout-s 120] [--steps 25]

The lifecycle of xtuner's ``run_sampled_token_mopd.sh``, in Python:

1. make sure the teacher fixture exists (``teachers.ensure_fixture``: cached checkpoints);
2. start one HTTP server per teacher replica (``teacher_server``), each in its own process
   group, on a port the kernel picks (never a fixed one), logging to
   ``<work_dir>/teachers/<teacher>-<replica>.log``;
3. wait until every server answers a real log-prob request; a server that exits first fails the launch at
   once, naming the teacher and its log, and one that has had ``--ready-timeout-s`` of its own time (wall
   time less its waits for a CPU, ``autotest.own_time``: load never decides it) fails it the same way;
4. export ``XTUNER_OPD_TEACHER_ENDPOINTS_JSON`` = ``{"<teacher>": ["http://127.0.0.1:PORT", ...]}``
   and run the training process (``autotest.workloads.mopd``), watching the servers: one that
   dies mid-run stops the run, naming the teacher and its log;
5. on every exit (success, failure, SIGTERM/SIGINT, an exception) terminate the training and
   every server process group (SIGTERM, wait, SIGKILL) and reap them. Ray is never started
   here, so there is no cluster to stop. Servers and training also exit by themselves when
   this process is gone (``--parent-pid``), so even SIGKILL leaves nothing behind.

Once the servers are ready, the teacher probe's references, the answers recorded beside the fixture when it was
made (``probe_answers``, checked against the weights on disk), are copied into
``<work_dir>/teachers/probe.json`` (``teacher_probe``); the training sends them through each teacher's endpoints
before its first step and after its last, and logs ``distillation/teacher_probe/<teacher>``.

Faults (``--fault``, listed with ``--list-faults``) and what the harness must make of them
against the golden table (``FAULTS``; tests/integration/workloads/test_mopd_faults.py holds them to it):

| fault | effect | verdict | breached | primary triage |
|---|---|---|---|---|
| ``teacher-swap`` | each teacher's URL exported under the other's name | FAIL | distill_kl, abs_loss | teacher-path |
| ``teacher-dies:K`` | the first teacher's server exits on its step-K request | ERROR | - | run-incomplete |
| ``teacher-misscore:K`` | from its step-K request on, the first teacher's server scores with unshifted logits (an off-by-one: token j+1 read at position j+1) | FAIL | teacher probe (digit_sum_teacher, at the end) | teacher-path |
| ``judge-bug[:MODE]`` | training rewards graded wrong (flip / off-by-one) | FAIL | rewards | rewards-only |
| ``crash-at:K`` | the training raises at step K | ERROR | - | run-incomplete |
| ``hang-at:K`` | the training sleeps forever at step K (the case timeout ends it) | ERROR | - | run-incomplete |

Exit code: the training's, 1 when a teacher died or never became ready, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.own_time import OwnClock
from autotest.workloads.faults import make_fault
from autotest.workloads.mopd import ACCEPTED_FAULTS
from autotest.workloads.regressions import MOPD_REGRESSIONS, listed
from autotest.workloads.tasks import get_task
from autotest.workloads.teacher_client import (
    ENDPOINTS_ENV,
    TeacherError,
    dump_endpoints,
    request_logprobs,
)
from autotest.workloads.teacher_probe import write_references
from autotest.workloads.teacher_server import DIED_EXIT_CODE
from autotest.workloads.teachers import (
    Fixture,
    correct_pairs,
    ensure_fixture,
    open_fixture,
    teacher_name,
)
from autotest.workloads.tiny_lm import DigitTokenizer

TEACHER_FAULTS = ("teacher-swap", "teacher-dies", "teacher-misscore")
#: the server flag of each teacher fault that takes a step (given to the first teacher's server)
STEP_FAULT_FLAGS = {"teacher-dies": "--exit-at-step", "teacher-misscore": "--misscore-from-step"}
#: every fault of tiny-mopd and the outcome the harness must give (the table above, as data)
FAULTS: dict[str, dict[str, Any]] = {
    "teacher-swap": {"verdict": "FAIL", "breached": ["distillation/reduced_distillation_kl"],
                     "triage": "teacher-path"},
    "teacher-dies": {"verdict": "ERROR", "breached": [], "triage": "run-incomplete", "arg": "K (required)"},
    "teacher-misscore": {"verdict": "FAIL", "breached": ["distillation/teacher_probe/digit_sum_teacher"],
                         "triage": "teacher-path", "arg": "K (required)"},
    "judge-bug": {"verdict": "FAIL", "breached": ["response/rewards/mean"], "triage": "rewards-only",
                  "arg": "MODE: flip (default) or off-by-one"},
    "crash-at": {"verdict": "ERROR", "breached": [], "triage": "run-incomplete", "arg": "K (required)"},
    "hang-at": {"verdict": "ERROR", "breached": [], "triage": "run-incomplete", "arg": "K (required)"},
}
TERM_GRACE_S = 5.0


class LaunchError(RuntimeError):
    """The launch cannot go on; the message names the teacher and its log."""


@dataclass
class Server:
    """One running teacher server process."""

    teacher: str
    replica: int
    proc: subprocess.Popen
    log: Path
    port_file: Path
    url: str = ""

    @property
    def label(self) -> str:
        return f"teacher server '{self.teacher}' (replica {self.replica}, pid {self.proc.pid})"

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"    | {line}" for line in text[-lines:])


def say(message: str, *, error: bool = False) -> None:
    """One line on stdout (or stderr for errors), flushed: the harness keeps both logs."""
    print(f"[mopd-launch] {message}", file=sys.stderr if error else sys.stdout, flush=True)


def parse_fault(spec: str | None) -> tuple[str | None, int | None, str | None]:
    """(teacher fault name, its step, training fault) of ``--fault``; a ``UsageError`` when unknown."""
    if not spec:
        return None, None, None
    name, _, arg = spec.partition(":")
    if name == "teacher-swap":
        if arg:
            raise UsageError(f"--fault teacher-swap: takes no argument (got {arg!r})")
        return name, None, None
    if name in STEP_FAULT_FLAGS:
        if not arg.isdigit() or int(arg) < 1:
            what = "dies" if name == "teacher-dies" else "starts misscoring"
            raise UsageError(f"--fault {name}: needs the step the first teacher {what} at, e.g. "
                             f"{name}:3 (got {arg!r})")
        return name, int(arg), None
    if name in ACCEPTED_FAULTS:  # the detection benchmark's regressions go to the training process too
        return None, None, spec
    raise UsageError(f"--fault: unknown fault {name!r} for tiny-mopd; choose one of "
                     f"{', '.join(TEACHER_FAULTS + ACCEPTED_FAULTS)}")


def start_servers(fixture: Fixture, folder: Path, replicas: int, die_at: int | None, servers: list[Server],
                  server_args: Sequence[str] = (), first_flag: str = "--exit-at-step") -> None:
    """One server process per teacher replica, each the leader of its own process group.

    ``server_args`` go to every server (a regression's serving change, e.g. ``--temperature``); the first
    teacher's servers get ``first_flag die_at`` when ``die_at`` is set (the step of a teacher fault).
    Each is appended to ``servers`` as soon as it runs, so a failure half-way still stops the others.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for index, domain in enumerate(fixture.domains):
        name = teacher_name(domain)
        for replica in range(replicas):
            log = folder / f"{name}-{replica}.log"
            port_file = folder / f"{name}-{replica}.port"
            port_file.unlink(missing_ok=True)
            command = [sys.executable, "-m", "autotest.workloads.teacher_server", "--model",
                       str(fixture.teacher(domain)), "--name", name, "--port-file", str(port_file),
                       "--parent-pid", str(os.getpid()), *server_args]
            if die_at is not None and index == 0:
                command += [first_flag, str(die_at)]
            with log.open("wb") as out:
                # own process group (so it can be signalled as a whole), same session (so the
                # harness's session sweep still reaches it)
                proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        process_group=0, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            servers.append(Server(name, replica, proc, log, port_file))
            say(f"started {servers[-1].label}; log {log}")


def _dead(server: Server, when: str) -> LaunchError:
    code = server.proc.poll()
    how = f"exited with code {code}" if code is not None and code >= 0 else \
        f"died (killed by {signal.Signals(-(code or 0)).name})"
    tail = server.tail()
    say(f"ERROR: {server.label} {how} {when}; its log: {server.log}" + (f"\n{tail}" if tail else ""), error=True)
    return LaunchError(f"{server.label} {how} {when}; its log: {server.log}")


def probe_tokens(domain: str) -> list[list[int]]:
    """A real request: one prompt of ``domain`` with a correct answer, to be scored."""
    task = get_task(domain)
    target = task.train_targets[0]
    return [list(task.prompt(target).token_ids) + list(correct_pairs(task, target)[0]) + [DigitTokenizer().eos_id]]


def wait_ready(servers: list[Server], timeout_s: float, probe: list[list[int]]) -> None:
    """Until every server answers a real log-prob request; ``LaunchError`` at once when one dies, or when one has
    had ``timeout_s`` of its own time (wall time less its waits for a CPU: a busy machine slows a start, it never
    decides it) without becoming ready."""
    clocks = {server.proc.pid: OwnClock(server.proc.pid, tree=False) for server in servers}
    pending = list(servers)
    while pending:
        for server in list(pending):
            if server.proc.poll() is not None:
                raise _dead(server, "before becoming ready")
            if not server.url:
                try:
                    port = json.loads(server.port_file.read_text(encoding="utf-8"))["port"]
                except (OSError, ValueError, KeyError):
                    continue  # not listening yet
                server.url = f"http://127.0.0.1:{port}"
            try:  # a listening server's first forward may take seconds on a busy machine: let it finish
                request_logprobs(server.url, probe, timeout_s=30.0)
            except TeacherError:
                continue
            say(f"{server.label} is ready at {server.url}")
            pending.remove(server)
        late = [s for s in pending if clocks[s.proc.pid].elapsed_s() >= timeout_s]
        if late:
            server, tail = late[0], late[0].tail()
            what = (f"{server.label} did not become ready within {timeout_s:g} s "
                    f"({clocks[server.proc.pid].describe()}); its log: {server.log}")
            say(f"ERROR: {what}" + (f"\n{tail}" if tail else ""), error=True)
            raise LaunchError(what)
        if pending:
            time.sleep(0.2)


def endpoints_of(servers: list[Server], swap: bool) -> dict[str, list[str]]:
    """The endpoints JSON object; with ``swap`` the two teachers trade URLs (the fault)."""
    endpoints: dict[str, list[str]] = {}
    for server in servers:
        endpoints.setdefault(server.teacher, []).append(server.url)
    if swap:
        names = list(endpoints)
        if len(names) != 2:
            raise UsageError(f"--fault teacher-swap: needs exactly two teachers, have {len(names)}")
        endpoints = {names[0]: endpoints[names[1]], names[1]: endpoints[names[0]]}
    return endpoints


def stop_groups(procs: list[subprocess.Popen], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the process groups of ``procs`` together, wait up to ``grace_s``, SIGKILL what is left, reap."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs if _group_alive(p.pid, p)]
        for proc in alive:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [p for p in alive if _group_alive(p.pid, p)]
        if not alive:
            break
    for proc in procs:
        proc.wait()


def _group_alive(pgid: int, leader: subprocess.Popen) -> bool:
    leader.poll()  # reap the leader, or it stays a zombie member of its group
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies count as gone: a reaped leader's group may still report them briefly
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
    return False


def run_training(args: argparse.Namespace, fixture: Fixture, servers: list[Server], endpoints: dict[str, list[str]],
                 training_fault: str | None, procs: dict[str, subprocess.Popen], probe: Path | None = None) -> int:
    """Run the training process while watching the servers; returns the exit code."""
    command = [sys.executable, "-m", "autotest.workloads.mopd", "--work-dir", str(args.work_dir),
               "--student", str(fixture.student), "--seed", str(args.seed), "--steps", str(args.steps),
               "--domains", ",".join(fixture.domains), "--parent-pid", str(os.getpid())]
    if training_fault:
        command += ["--fault", training_fault]
    if probe is not None:
        command += ["--teacher-probe", str(probe)]
    env = {**os.environ, ENDPOINTS_ENV: dump_endpoints(endpoints), "PYTHONUNBUFFERED": "1"}
    say(f"{ENDPOINTS_ENV}={env[ENDPOINTS_ENV]}")
    procs["training"] = training = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env, process_group=0)
    while True:
        try:
            return training.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            pass
        for server in servers:
            if server.proc.poll() is not None:
                raise _dead(server, "during training")


def launch(args: argparse.Namespace) -> int:
    """The whole lifecycle; every path out goes through the cleanup."""
    teacher_fault, die_at, training_fault = parse_fault(args.fault)
    fixture = open_fixture(args.fixture) if args.fixture else ensure_fixture(log=say)
    # which weights this run distils, bit for bit: a baseline only holds for the fixture it was calibrated on
    say(f"fixture {fixture.root}: weights sha256 "
        + ", ".join(f"{name} {digest[:12]}" for name, digest in fixture.weights().items()))
    servers: list[Server] = []
    procs: dict[str, subprocess.Popen] = {}
    try:
        server_args = make_fault(training_fault, args.seed).teacher_server_args()
        start_servers(fixture, args.work_dir / "teachers", args.replicas, die_at, servers, server_args,
                      STEP_FAULT_FLAGS.get(teacher_fault or "", "--exit-at-step"))
        wait_ready(servers, args.ready_timeout_s, probe_tokens(fixture.domains[0]))
        say(f"all {len(servers)} teacher servers are ready")
        # the probe's references: the answers recorded beside the fixture when it was made (probe_answers, a forward
        # that shares no code with the server), checked against the weights on disk
        probe = args.work_dir / "teachers" / "probe.json"
        write_references(fixture, probe, log=say)
        say(f"teacher probe references: the fixture's recorded answers, {probe}")
        endpoints = endpoints_of(servers, swap=teacher_fault == "teacher-swap")
        code = run_training(args, fixture, servers, endpoints, training_fault, procs, probe)
        if code != 0:
            # the training may notice a dead teacher (connection reset) just before we do
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                for server in servers:
                    if server.proc.poll() is not None:
                        raise _dead(server, "during training")
                time.sleep(0.05)
        say(f"training exited with code {code}")
        return code
    except LaunchError:
        return 1
    finally:
        # a second Ctrl-C or SIGTERM must not cut the cleanup short (the harness SIGKILLs after its grace)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if "training" in procs and procs["training"].poll() is None:
            say("stopping the training process")
            stop_groups([procs["training"]])
        stop_groups([server.proc for server in servers])
        if servers:
            died = [s for s in servers if s.proc.returncode == DIED_EXIT_CODE]
            say(f"stopped {len(servers)} teacher server(s)" + (f" ({len(died)} had died)" if died else ""))


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through launch()'s cleanup


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m autotest.workloads.mopd_launch",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, help="the run's work folder (default: $WORK_DIR)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--fault", help=f"inject a fault NAME[:ARG] ({', '.join(TEACHER_FAULTS + ACCEPTED_FAULTS)})")
    p.add_argument("--fixture", type=Path, help="a prepared fixture dir instead of the cached one")
    p.add_argument("--replicas", type=int, default=1, help="servers per teacher")
    p.add_argument("--ready-timeout-s", type=float, default=120.0,
                   help="seconds of its own time (waits for a CPU not counted) a teacher may take to start")
    p.add_argument("--list-faults", action="store_true", help="print the fault catalogue as JSON and exit")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    if args.list_faults:
        print(json.dumps({**FAULTS, **{r["name"]: r for r in listed(MOPD_REGRESSIONS)}}, indent=2))
        return 0
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    try:
        if args.work_dir is None:
            if not os.environ.get("WORK_DIR"):
                raise UsageError("--work-dir: missing; pass --work-dir DIR or set WORK_DIR")
            args.work_dir = Path(os.environ["WORK_DIR"])
        args.work_dir = args.work_dir.resolve()
        if args.replicas < 1 or args.ready_timeout_s <= 0 or args.steps < 1:
            raise UsageError("--replicas, --steps and --ready-timeout-s must be positive")
        return launch(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
