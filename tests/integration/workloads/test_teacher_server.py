"""The teacher HTTP server as a real process: port file, health, log-probs, bad requests, faults, exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teacher_client import TeacherError, health, request_logprobs  # noqa: E402
from autotest.workloads.teacher_server import DIED_EXIT_CODE, LOGPROBS_PATH  # noqa: E402
from autotest.workloads.probe_answers import (  # noqa: E402
    ANSWERS_FILE,
    qwen3_logprobs,
    record_answers,
    recorded_answers,
)
from autotest.workloads.teachers import Fixture, teacher_name  # noqa: E402
from tests import waits  # noqa: E402

#: real teacher servers over trained teachers (~100 s of setup on 2 cores);
#: out of the quick tier, `pytest -m "not slow"`
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Served:
    """A teacher server started by a test."""

    proc: subprocess.Popen
    url: str
    port_file: Path
    log: Path


def start_server(model: Path, folder: Path, name: str, *extra: str, timeout_s: float = 120.0) -> Served:
    """Start ``teacher_server`` on ``model`` and wait for its port file (``timeout_s`` of the server's own time:
    it loads in ~10 s of it; a busy machine only makes the wait longer)."""
    folder.mkdir(parents=True, exist_ok=True)
    port_file, log = folder / f"{name}.port", folder / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "autotest.workloads.teacher_server", "--model", str(model),
                                 "--name", name, "--port-file", str(port_file), *extra],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, process_group=0)
    waits.until(port_file.is_file, timeout_s, proc=proc, what=log.read_text)
    info = json.loads(port_file.read_text())
    assert info["pid"] == proc.pid and info["name"] == name
    return Served(proc, f"http://127.0.0.1:{info['port']}", port_file, log)


def stop(served: Served) -> None:
    if served.proc.poll() is None:
        os.killpg(served.proc.pid, signal.SIGKILL)
    waits.wait(served.proc, 10)


@pytest.fixture(scope="module")
def sum_teacher(mopd_fixture: Fixture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the tests that only send requests (starting one costs seconds)."""
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path_factory.mktemp("server"), "digit_sum_teacher")
    yield served
    stop(served)


def sequences() -> list[list[int]]:
    task = get_task("digit_sum")
    return [list(task.prompt(5).token_ids) + [2, 3, 11], list(task.prompt(9).token_ids) + [4, 5, 0, 0, 11],
            list(task.prompt(1).token_ids) + [1, 11]]


def reference_logprobs(checkpoint: Path, seq: list[int], temperature: float = 1.0) -> list[float]:
    """What a server of ``checkpoint`` must answer for ``seq``, scored by code the server does not run: the
    plain-torch forward from ``model.safetensors`` (``probe_answers.qwen3_logprobs``), never ``load_checkpoint``
    and the model class the server scores with (a reference made that way agrees with a server that loads the
    wrong weights)."""
    return qwen3_logprobs(checkpoint, [seq], temperature=temperature)[0]


def recorded(fixture: Fixture, domain: str) -> dict:
    """The teacher's answers recorded beside the fixture, checked against its weights (scored now, by the
    same plain-torch forward, for a fixture made before answers were kept)."""
    if not (fixture.root / ANSWERS_FILE).exists():
        record_answers(fixture.root, fixture.domains)
    return recorded_answers(fixture.root, fixture.weights(), fixture.domains)[teacher_name(domain)]


def test_health_and_logprobs_match_the_checkpoint(sum_teacher: Served, mopd_fixture: Fixture) -> None:
    reply = health(sum_teacher.url)
    assert reply["status"] == "ok" and reply["name"] == "digit_sum_teacher"
    assert reply["model"] == str(mopd_fixture.teacher("digit_sum"))
    checkpoint = mopd_fixture.teacher("digit_sum")
    batch = request_logprobs(sum_teacher.url, sequences(), step=1)
    for seq, got in zip(sequences(), batch, strict=True):
        assert len(got) == len(seq) - 1
        assert got == pytest.approx(reference_logprobs(checkpoint, seq), abs=1e-5)
        # batched with right padding == each sequence alone
        assert request_logprobs(sum_teacher.url, [seq]) == [pytest.approx(got, abs=1e-5)]
    # the answers recorded when the fixture was made (from the weights fixture.json pins)
    answers = recorded(mopd_fixture, "digit_sum")
    served = request_logprobs(sum_teacher.url, answers["token_ids"])
    for got, want in zip(served, answers["logprobs"], strict=True):
        assert got == pytest.approx(want, abs=1e-5)
    assert health(sum_teacher.url)["requests"] >= 2 + len(sequences())
    assert "step 1: 3 sequences" in sum_teacher.log.read_text()


def _post_raw(url: str, body: bytes, path: str = LOGPROBS_PATH) -> tuple[int, dict]:
    request = urllib.request.Request(url + path, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("body, message", [
    (b"not json", "body is not JSON"),
    (b'{"ids": [[1, 2]]}', 'body must be {"token_ids": [[id, ...], ...]} with at least one sequence'),
    (b'{"token_ids": []}', 'body must be {"token_ids": [[id, ...], ...]} with at least one sequence'),
    (b'{"token_ids": [[1]]}', "token_ids[0] must be a list of 2..32 ids"),
    (b'{"token_ids": [[1, 2], [1, 99]]}', "token_ids[1] has an id outside 0..15"),
    (b'{"token_ids": [[1, 2]], "step": "3"}', "step must be an integer, got '3'"),
])
def test_bad_requests_get_400_with_the_reason(sum_teacher: Served, body: bytes, message: str) -> None:
    assert _post_raw(sum_teacher.url, body) == (400, {"error": message})


def test_unknown_paths_get_404(sum_teacher: Served) -> None:
    status, reply = _post_raw(sum_teacher.url, b'{"token_ids": [[1, 2]]}', path="/generate")
    assert status == 404 and "use POST /v1/logprobs" in reply["error"]
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(sum_teacher.url + "/", timeout=120)
    with info.value:
        assert info.value.code == 404


def test_temperature_scores_the_logits_over_t(mopd_fixture: Fixture, tmp_path: Path) -> None:
    """The teacher-temperature regression: every log-prob is of logits / T, a flatter target for T > 1."""
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path, "warm", "--temperature", "2")
    try:
        checkpoint, seq = mopd_fixture.teacher("digit_sum"), sequences()[0]
        got = request_logprobs(served.url, [seq])[0]
        assert got == pytest.approx(reference_logprobs(checkpoint, seq, temperature=2), abs=1e-5)
        assert got != pytest.approx(reference_logprobs(checkpoint, seq), abs=1e-3)
    finally:
        stop(served)


def test_exit_at_step_dies_without_reply(mopd_fixture: Fixture, tmp_path: Path) -> None:
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path, "dying", "--exit-at-step", "2")
    try:
        assert len(request_logprobs(served.url, sequences(), step=1)) == 3
        assert len(request_logprobs(served.url, sequences())) == 3  # no step: a probe, never the fault
        with pytest.raises(TeacherError, match=r"did not answer"):
            request_logprobs(served.url, sequences(), step=2)
        assert waits.wait(served.proc, 10) == DIED_EXIT_CODE
        assert "injected fault teacher-dies:2: teacher dying exits on a request for step 2" in served.log.read_text()
    finally:
        stop(served)


def test_a_second_server_takes_another_free_port_and_stops_on_sigterm(
        sum_teacher: Served, mopd_fixture: Fixture, tmp_path: Path) -> None:
    other = start_server(mopd_fixture.teacher("digit_product"), tmp_path, "digit_product_teacher")
    try:
        ports = {int(s.url.rsplit(":", 1)[1]) for s in (sum_teacher, other)}
        assert len(ports) == 2 and all(p >= 1024 for p in ports)
        other.proc.send_signal(signal.SIGTERM)
        assert waits.wait(other.proc, 10) == 0
        assert "SIGTERM: stopping" in other.log.read_text()
    finally:
        stop(other)


def test_it_exits_when_its_parent_is_killed(mopd_fixture: Fixture, tmp_path: Path) -> None:
    port_file = tmp_path / "orphan.port"
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-m', "
         "'autotest.workloads.teacher_server', '--model', sys.argv[1], '--name', 'orphan', '--port-file', "
         "sys.argv[2], '--parent-pid', str(os.getpid())]); print(p.pid, flush=True); time.sleep(300)",
         str(mopd_fixture.teacher("digit_sum")), str(port_file)],
        cwd=REPO, stdout=subprocess.PIPE, text=True, process_group=0)
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    try:
        waits.until(port_file.is_file, 120, proc=parent)
        parent.kill()  # SIGKILL: no cleanup code of the parent runs
        parent.wait()
        parent.stdout.close()
        # it notices within half a second of its own time, then exits
        waits.until(lambda: not _alive(server_pid), 10, pid=server_pid, what="the orphaned server did not exit")
    finally:
        if _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


# ---- limits: what a client may make a teacher do ------------------------------------------------


def _raw(url: str, data: bytes, *, wait_s: float = 10.0) -> tuple[bytes, float]:
    """Send ``data`` on a fresh socket and read until the server closes it: (all it sent, seconds it took)."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def test_it_listens_on_loopback_only_by_default(sum_teacher: Served) -> None:
    assert sum_teacher.url.startswith("http://127.0.0.1:")
    listening = {line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                 if line.split()[3] == "0A"}  # state LISTEN; local address as hex ip:port
    port = f"{int(sum_teacher.url.rsplit(':', 1)[1]):04X}"
    assert f"0100007F:{port}" in listening and f"00000000:{port}" not in listening


def test_an_oversized_body_is_refused_unread_and_the_connection_closed(sum_teacher: Served) -> None:
    from autotest.workloads.teacher_server import MAX_BODY_BYTES

    head = (f"POST {LOGPROBS_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n").encode()
    # the body is never sent: the server must answer from the header alone, not wait for 64 MiB
    timed_out_before = sum_teacher.log.read_text().count("Request timed out")
    reply, _ = _raw(sum_teacher.url, head + b'{"token_ids": [[1, 2]]}', wait_s=300)
    status, _, body = reply.partition(b"\r\n")[0], None, reply.split(b"\r\n\r\n", 1)[1]
    assert status == b"HTTP/1.1 413 Request Entity Too Large"
    assert json.loads(body) == {"error": f"body of {MAX_BODY_BYTES + 1} bytes is over the limit of {MAX_BODY_BYTES}"}
    # closed by the server at once: had it kept the connection, it would have read the unsent body as the next
    # request and hung up only at its request timeout, logging it (no clock needed to tell)
    assert sum_teacher.log.read_text().count("Request timed out") == timed_out_before
    assert health(sum_teacher.url)["status"] == "ok"


@pytest.fixture(scope="module")
def strict_teacher(mopd_fixture: Fixture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server that hangs up on a client silent for 1 s, shared by the slow-client cases (one start, not one each)."""
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path_factory.mktemp("strict"), "strict",
                          "--request-timeout-s", "1")
    yield served
    stop(served)


@pytest.mark.parametrize("partial", [
    b"POST /v1/logprobs HTT",  # stalls in the request line
    b"POST /v1/logprobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"token_ids\": ",  # stalls in the body
])
def test_a_slow_client_is_cut_off(partial: bytes, strict_teacher: Served) -> None:
    timed_out_before = strict_teacher.log.read_text().count("Request timed out")
    # the client never sends the rest: only the server's 1 s request timeout can end this (the client's 300 s
    # is the bound on a broken server, beyond any delay a busy machine adds to a 1 s timer)
    reply, took_s = _raw(strict_teacher.url, partial, wait_s=300)
    assert reply == b"" and took_s > 0.9  # hung up on after a second of silence (load only lengthens it)
    assert strict_teacher.log.read_text().count("Request timed out") == timed_out_before + 1  # this one
    assert len(request_logprobs(strict_teacher.url, sequences())) == 3  # and it still serves others
