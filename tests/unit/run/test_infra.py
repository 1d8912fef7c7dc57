"""Infra failure signatures on real-looking logs, the retry policy and the retry trail."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.infra import (
    DEFAULT_POLICY,
    Classification,
    InfraFailure,
    InfraKind,
    KindPolicy,
    RetryPolicy,
    RetryTrail,
    classify,
    classify_log_file,
    decide_retry,
    find_failures,
)

HEALTHY_LOG = """\
+ ray stop --force
Did not find any active Ray processes.
+ ray start --head --port=6379 --dashboard-host=127.0.0.1
Local node IP: 10.0.3.17
Ray runtime started.
To connect to this Ray cluster: ray.init(address='10.0.3.17:6379')
GCS address: 10.0.3.17:6379
[env] NCCL_TIMEOUT=1800 NCCL_DEBUG=INFO TORCH_NCCL_ASYNC_ERROR_HANDLING=1
[env] nccl_timeout: 1800  dist_timeout_s: 1800
waiting for teacher gsm8k at http://127.0.0.1:23333/v1/models ...
curl: (7) Failed to connect to 127.0.0.1 port 23333 after 0 ms: Connection refused
teacher gsm8k ready after 41 s
(WorkerWrapper pid=81234) node-17:81234:81234 [0] NCCL INFO Bootstrap : Using eth0:10.0.3.17<0>
(WorkerWrapper pid=81234) node-17:81234:81234 [0] NCCL INFO comm 0x5581 rank 0 nranks 8 cudaDev 0 - Init COMPLETE
[XTuner][2026-10-26 10:02:11][INFO] NCCL timeout set to 1800 s for the training process group
[XTuner][2026-10-26 10:02:40][INFO] rollout step 1: 64 prompts, 512 responses, gen time 38.2 s
[XTuner][2026-10-26 10:03:19][INFO] train step 1: loss 0.0132 grad_norm 0.412 lr 1e-06
[XTuner][2026-10-26 10:03:19][INFO] memory: reserved 61.3 GiB, max allocated 58.9 GiB
[XTuner][2026-10-26 10:03:20][INFO] step 1 time/step 79.4 s response/rewards/mean 0.4531
Killed 0 stale worker processes before the next rollout
[XTuner][2026-10-26 11:20:02][INFO] training finished: 45 steps
teacher server gsm8k (pid 9911) stopped by the EXIT trap
+ ray stop --force
Stopped all 12 Ray processes.
"""

CUDA_OOM = """\
[XTuner][2026-10-26 10:13:07][INFO] train step 6: loss 0.0141
Traceback (most recent call last):
  File "/work/xtuner/xtuner/v1/train/rl_trainer.py", line 512, in fit
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is free.
[rank3]: Process 81237 has 78.09 GiB memory in use.
"""

HOST_KILLED = """\
[XTuner][2026-10-26 10:40:51][INFO] rollout step 12: 64 prompts
examples/v1/scripts/run_rl.sh: line 58: 77120 Killed                  python xtuner/v1/train/cli/rl.py --config $CONFIG
"""

RAY_OOM = """\
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
Memory on the node (IP: 10.0.3.17, ID: 4f2a) where the task was running was 1008.23GB / 1023.84GB (0.98476), which exceeds the memory usage threshold of 0.95.
"""

NCCL_WATCHDOG = """\
[rank5]:[E1026 10:55:03.118212 81239 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1184, OpType=ALLREDUCE, NumelIn=131072, NumelOut=131072, Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out.
[rank5]:[E1026 10:55:03.118901 81239 ProcessGroupNCCL.cpp:1785] [PG 0 (default_pg) Rank 5] Exception (either an error before or during the collective).
"""

NCCL_PLAIN_TIMEOUT = """\
RuntimeError: NCCL timeout in call to ncclCommInitRank after 600 s (rank 2 of 8)
"""

NCCL_ERR = """\
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
"""

PORT = """\
  File "/usr/lib/python3.11/socketserver.py", line 473, in server_bind
    self.socket.bind(self.server_address)
OSError: [Errno 98] Address already in use
"""

PORT_NODE = "Error: listen EADDRINUSE: address already in use 0.0.0.0:8265\n"

TEACHER_DIED = """\
[mopd] teacher server geo3k (pid 9932, port 23334) exited with code 1 while training was running
"""

CONN_REFUSED = """\
  File "/work/xtuner/recipe/on_policy_distillation/teacher_client.py", line 88, in logprobs
    resp = self.session.post(url, json=payload, timeout=60)
requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=23333): Max retries exceeded with url: /generate (Caused by NewConnectionError(': Failed to establish a new connection: [Errno 111] Connection refused'))
"""

RAY_SYSTEM = "ray.exceptions.RaySystemError: System error: Failed to unpickle serialized exception\n"

RAY_GCS = """\
[2026-10-26 10:58:12,017 E 77301 77301] gcs_rpc_client.h:179: Failed to connect to GCS at address 10.0.3.17:6379 within 60 seconds.
"""

RAY_NODE_DEAD = """\
The node with node id: 9c1e and address: 10.0.3.18 and node name: 10.0.3.18 has been marked dead because the detector has missed too many heartbeats from it.
"""

DISK = """\
  File "/work/xtuner/xtuner/v1/engine/checkpoint.py", line 141, in save
    torch.save(state, path)
OSError: [Errno 28] No space left on device
"""

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"

STALE = "OSError: [Errno 116] Stale file handle: '/mnt/share/models/Qwen3-8B/model-00003-of-00005.safetensors'\n"


@pytest.mark.parametrize(
    ("log", "exit_code", "kind", "signature"),
    [
        (CUDA_OOM, 1, InfraKind.OOM, "CUDA out of memory"),
        (HOST_KILLED, 137, InfraKind.OOM, "process Killed (exit 137)"),
        (HOST_KILLED, -9, InfraKind.OOM, "process Killed (exit 137)"),
        (RAY_OOM, 1, InfraKind.OOM, "Ray node low on memory"),
        (NCCL_WATCHDOG, 1, InfraKind.NCCL_TIMEOUT, "NCCL watchdog timeout"),
        (NCCL_PLAIN_TIMEOUT, 1, InfraKind.NCCL_TIMEOUT, "NCCL timeout"),
        (NCCL_ERR, 1, InfraKind.NCCL_ERROR, "NCCL error"),
        (PORT, 1, InfraKind.PORT_IN_USE, "Address already in use"),
        (PORT_NODE, 1, InfraKind.PORT_IN_USE, "Address already in use"),
        (TEACHER_DIED, 1, InfraKind.SERVER_DIED, "server exited"),
        (CONN_REFUSED, 1, InfraKind.SERVER_DIED, "Connection refused"),
        (RAY_SYSTEM, 1, InfraKind.RAY, "RaySystemError"),
        (RAY_GCS, 1, InfraKind.RAY, "GCS failure"),
        (RAY_NODE_DEAD, 1, InfraKind.RAY, "Ray node marked dead"),
        (DISK, 1, InfraKind.DISK_FULL, "No space left on device"),
        (ECC, 1, InfraKind.GPU_FAULT, "GPU hardware fault"),
        (STALE, 1, InfraKind.SHARED_FS, "Stale file handle"),
    ],
)
def test_each_signature_inside_a_training_log(log: str, exit_code: int, kind: InfraKind, signature: str) -> None:
    # Surround the failure with healthy lines: the signature must still be found, at its line.
    text = HEALTHY_LOG + log + "+ ray stop --force\n"
    failure = classify(text, exit_code)
    assert failure is not None
    assert (failure.kind, failure.signature) == (kind, signature)
    failing_line = text.splitlines()[failure.line_number - 1]
    assert failing_line in failure.excerpt
    assert failure.excerpt.splitlines()[_excerpt_index(failure)] == failing_line


def _excerpt_index(failure: InfraFailure) -> int:
    return min(2, failure.line_number - 1)


def test_healthy_training_log_has_no_infra_failure() -> None:
    assert find_failures(HEALTHY_LOG.splitlines(), exit_code=0) == []
    # A non-zero exit alone (a regression, a crash in the code) is not an infra failure either.
    assert classify(HEALTHY_LOG + "ValueError: reward function returned None\n", exit_code=1) is None


def test_killed_counts_only_with_a_sigkill_exit_code() -> None:
    assert classify(HOST_KILLED, exit_code=1) is None
    assert classify(HOST_KILLED, exit_code=None) is None


def test_root_cause_wins_over_the_symptoms_it_causes() -> None:
    # Rank 3 runs out of memory; 30 minutes later the other ranks hit the NCCL watchdog.
    log = CUDA_OOM + NCCL_WATCHDOG + RAY_SYSTEM
    assert [f.kind for f in find_failures(log.splitlines(), 1)] == [
        InfraKind.OOM,
        InfraKind.NCCL_TIMEOUT,
        InfraKind.RAY,
    ]
    assert classify(NCCL_WATCHDOG + CUDA_OOM, 1).kind is InfraKind.OOM  # type: ignore[union-attr]


def test_excerpt_has_context_around_the_line_and_reports_the_first_hit() -> None:
    text = "a\nb\nc\nOSError: [Errno 28] No space left on device\nd\ne\nf\nOSError: [Errno 28] again\n"
    failure = classify(text, 1)
    assert failure == InfraFailure(
        InfraKind.DISK_FULL,
        "No space left on device",
        4,
        "b\nc\nOSError: [Errno 28] No space left on device\nd\ne",
    )
    assert classify("OSError: [Errno 28] No space left on device", 1).excerpt.count("\n") == 0  # type: ignore[union-attr]


def test_classify_log_file_reads_undecodable_bytes(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"\xff\xfe binary junk\n" + CUDA_OOM.encode())
    failure = classify_log_file(log, exit_code=1)
    assert failure is not None and failure.kind is InfraKind.OOM
    assert failure.line_number == 6


def _infra(kind: InfraKind) -> InfraFailure:
    return InfraFailure(kind, kind.value, 10, "excerpt")


def test_accuracy_fail_is_never_retried_even_with_an_infra_signature() -> None:
    decision = decide_retry([], Classification("FAIL", _infra(InfraKind.PORT_IN_USE)), DEFAULT_POLICY)
    assert not decision.retry
    assert "never relaunched" in decision.reason


def test_pass_and_unknown_errors_are_not_retried() -> None:
    assert not decide_retry([], Classification("PASS"), DEFAULT_POLICY).retry
    unknown = decide_retry([], Classification("ERROR", None), DEFAULT_POLICY)
    assert not unknown.retry and "no known infrastructure signature" in unknown.reason


def test_per_kind_limit_and_growing_backoff() -> None:
    trail = RetryTrail()
    port = Classification("ERROR", _infra(InfraKind.PORT_IN_USE), log_path="logs/attempt.log")
    trail, first = trail.record(port, DEFAULT_POLICY)
    trail, second = trail.record(port, DEFAULT_POLICY)
    trail, third = trail.record(port, DEFAULT_POLICY)
    assert (first.retry, first.wait_s) == (True, 30)
    assert (second.retry, second.wait_s) == (True, 60)
    assert not third.retry and "already relaunched 2 time(s)" in third.reason


def test_total_cap_across_kinds() -> None:
    policy = RetryPolicy(per_kind=DEFAULT_POLICY.per_kind, max_total_relaunches=2)
    trail = RetryTrail()
    for kind in (InfraKind.RAY, InfraKind.NCCL_TIMEOUT):
        trail, decision = trail.record(Classification("ERROR", _infra(kind)), policy)
        assert decision.retry
    trail, decision = trail.record(Classification("ERROR", _infra(InfraKind.OOM)), policy)
    assert not decision.retry and "limit for one run" in decision.reason


def test_kinds_a_relaunch_cannot_fix_are_not_retried() -> None:
    for kind in (InfraKind.DISK_FULL, InfraKind.GPU_FAULT):
        decision = decide_retry([], Classification("ERROR", _infra(kind)), DEFAULT_POLICY)
        assert not decision.retry and "needs a person" in decision.reason


def test_policy_from_mapping_overrides_and_rejects_unknown_kinds() -> None:
    policy = RetryPolicy.from_mapping(
        {"max_total_relaunches": 5, "kinds": {"oom": {"max_relaunches": 3, "backoff_s": 5}}}, "ci.yaml"
    )
    assert policy.per_kind[InfraKind.OOM] == KindPolicy(3, 5.0)
    assert policy.per_kind[InfraKind.RAY] == DEFAULT_POLICY.per_kind[InfraKind.RAY]
    assert policy.max_total_relaunches == 5
    with pytest.raises(UsageError, match=r"^ci.yaml: retry.kinds.oops: unknown infra kind; use one of oom, "):
        RetryPolicy.from_mapping({"kinds": {"oops": {"max_relaunches": 1}}}, "ci.yaml")
    with pytest.raises(UsageError, match=r"^ci.yaml: retry.kinds.ray.max_relaunches: give an integer >= 0$"):
        RetryPolicy.from_mapping({"kinds": {"ray": {"backoff_s": 1}}}, "ci.yaml")
    with pytest.raises(UsageError, match=r"retry.max_total_relaunches: give an integer >= 0, got -1"):
        RetryPolicy.from_mapping({"max_total_relaunches": -1}, "ci.yaml")


def test_trail_renders_every_attempt_with_its_excerpt_and_decision() -> None:
    oom = classify(HEALTHY_LOG + CUDA_OOM, exit_code=1)
    trail, _ = RetryTrail().record(Classification("ERROR", oom, "logs/attempt-1.log"), DEFAULT_POLICY)
    trail, _ = trail.record(Classification("FAIL", None, "logs/attempt-2.log"), DEFAULT_POLICY)
    text = trail.to_markdown()
    assert "| 1 | ERROR | oom: CUDA out of memory | relaunch after 60 s: oom (CUDA out of memory): relaunch 1 of 1 |" in text
    assert "| 2 | FAIL | none found | stop: accuracy FAIL is a verdict on the code" in text
    assert f"`logs/attempt-1.log:{oom.line_number}`" in text  # type: ignore[union-attr]
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
    as_dict = trail.to_dict()
    assert as_dict[0]["infra"]["kind"] == "oom" and as_dict[0]["decision"]["retry"] is True
    assert as_dict[1]["infra"] is None and as_dict[1]["log_path"] == "logs/attempt-2.log"
    assert RetryTrail().to_markdown() == ""
