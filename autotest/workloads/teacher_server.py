"""One teacher as an HTTP server on loopback: per-token log-probs of given token ids.

    python -m autotest.workloads.teacher_server --model DIR --name NAME --port-file PATH
        [--host 127.0.0.1] [--parent-pid PID] [--exit-at-step K] [--temperature T]
        [--request-timeout-s S] [--misscore-from-step K] [--missing-keys PREFIX]

It binds port 0 (the kernel picks a free port, never a fixed one) and writes
``{"port", "pid", "name"}`` to ``--port-file`` (atomically) once it listens. Endpoints:

- ``GET /health`` -> ``{"status": "ok", "name", "model", "requests"}``
- ``POST /v1/logprobs`` with ``{"token_ids": [[id, ...], ...], "step": N}`` (``step`` optional,
  for the log) -> ``{"name", "logprobs": [[lp, ...], ...]}`` where ``logprobs[i][j]`` is
  log p(token ``j + 1`` | tokens ``0..j``) of sequence ``i`` in fp32 (length ``len - 1``).
  A malformed request gets 400 with ``{"error": ...}``; a body over ``MAX_BODY_BYTES`` gets 413 and the
  connection is closed unread.

It listens on loopback unless ``--host`` says otherwise (the teachers serve the training run on the
same node; nothing else should reach them). A client that stalls mid-request (headers or body) is cut
off after ``--request-timeout-s`` (default 30 s) of silence, so a stuck or hostile client never holds a
server thread.

Requests are served on threads; the forward passes run one at a time. With ``--parent-pid``
the server exits when that process is gone (a launcher killed with SIGKILL leaves no server
behind). ``--exit-at-step K`` is the ``teacher-dies`` fault: the process exits (code 3,
no reply) on the first request for step K or later. ``--temperature T`` (default 1) scores with
the logits over T: the ``teacher-temperature`` regression of the detection benchmark.
``--misscore-from-step K`` is the ``teacher-misscore`` fault: from the first request for step K on
(and for every request after it, probes included: the server was swapped, it stays swapped) the
server scores with unshifted logits, the off-by-one of a gather that forgets ``[:, :-1]``: the
log-prob it returns for token ``j + 1`` is read from the logits at position ``j + 1``.
``--missing-keys PREFIX`` is the ``teacher-keys-renamed`` regression (``regressions_unseen``): the parameters under
PREFIX are initialised afresh after the load, as a checkpoint whose keys there were renamed loads them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

LOGPROBS_PATH = "/v1/logprobs"
HEALTH_PATH = "/health"
DIED_EXIT_CODE = 3
MAX_BODY_BYTES = 64 << 20  # a batch of token ids is kilobytes; this bounds what one request may make us buffer
REQUEST_TIMEOUT_S = 30.0  # silence on a socket mid-request before the server hangs up


class BadRequest(ValueError):
    """A request the server answers with 400."""


class Teacher:
    """The model and its one-at-a-time forward."""

    def __init__(self, model_dir: Path, name: str, exit_at_step: int | None = None, temperature: float = 1.0,
                 misscore_from_step: int | None = None, missing_keys: str | None = None) -> None:
        import torch

        from autotest.workloads.teachers import load_checkpoint

        torch.set_num_threads(1)
        self.model_dir = model_dir
        self.name = name
        self.model = load_checkpoint(model_dir)
        if missing_keys:
            _initialise_afresh(self.model, missing_keys)
        self.vocab_size = int(self.model.config.vocab_size)
        self.max_len = int(self.model.config.max_position_embeddings)
        self.pad_id = 0  # any id: right padding never changes a causal model's earlier positions
        self.exit_at_step = exit_at_step
        self.temperature = temperature
        self.misscore_from_step = misscore_from_step
        self.misscoring = False
        self.requests = 0
        self._lock = threading.Lock()

    def check(self, body: Any) -> tuple[list[list[int]], int | None]:
        """The token id lists and the step of a request body; ``BadRequest`` otherwise."""
        if not isinstance(body, dict) or not isinstance(body.get("token_ids"), list) or not body["token_ids"]:
            raise BadRequest('body must be {"token_ids": [[id, ...], ...]} with at least one sequence')
        step = body.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise BadRequest(f"step must be an integer, got {step!r}")
        sequences = body["token_ids"]
        for i, seq in enumerate(sequences):
            if not isinstance(seq, list) or not 2 <= len(seq) <= self.max_len:
                raise BadRequest(f"token_ids[{i}] must be a list of 2..{self.max_len} ids")
            if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < self.vocab_size for t in seq):
                raise BadRequest(f"token_ids[{i}] has an id outside 0..{self.vocab_size - 1}")
        return sequences, step

    def logprobs(self, sequences: list[list[int]]) -> list[list[float]]:
        """log p(token j+1 | tokens 0..j) of every sequence, in fp32."""
        import torch

        width = max(len(s) for s in sequences)
        ids = torch.tensor([s + [self.pad_id] * (width - len(s)) for s in sequences])
        with self._lock, torch.no_grad():
            self.requests += 1
            out = self.model(input_ids=ids, use_cache=False).logits
            # the teacher-misscore fault: position j+1's logits score token j+1 (the shift forgotten)
            logits = (out[:, 1:, :] if self.misscoring else out[:, :-1, :]).float()
            if self.temperature != 1.0:  # the default path stays bitwise what it was
                logits = logits / self.temperature
            logp = logits.log_softmax(dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        return [row[: len(s) - 1] for row, s in zip(logp.tolist(), sequences, strict=True)]

    def maybe_die(self, step: int | None) -> None:
        """The ``teacher-dies`` fault: exit without replying once ``step`` reaches K."""
        if self.exit_at_step is not None and step is not None and step >= self.exit_at_step:
            log(f"injected fault teacher-dies:{self.exit_at_step}: teacher {self.name} exits on a request "
                f"for step {step}")
            os._exit(DIED_EXIT_CODE)

    def maybe_misscore(self, step: int | None) -> None:
        """The ``teacher-misscore`` fault: from the first request for step K on, every answer is off by one."""
        if (self.misscore_from_step is not None and not self.misscoring and step is not None
                and step >= self.misscore_from_step):
            self.misscoring = True
            log(f"injected fault teacher-misscore:{self.misscore_from_step}: teacher {self.name} scores with "
                f"unshifted logits from step {step} on")


def log(message: str) -> None:
    """One timestamped line on stdout (the launcher sends it to the teacher's log file)."""
    print(f"{time.strftime('%H:%M:%S')} [teacher-server] {message}", flush=True)


class BodyTooLarge(BadRequest):
    """A request the server answers with 413 (and closes the connection without reading the body)."""


def make_handler(teacher: Teacher, request_timeout_s: float = REQUEST_TIMEOUT_S) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to ``teacher``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = request_timeout_s  # socket timeout: http.server drops the connection on a stalled read

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path != HEALTH_PATH:
                self._reply(404, {"error": f"no such path {self.path}; use GET {HEALTH_PATH}"})
                return
            self._reply(200, {"status": "ok", "name": teacher.name, "model": str(teacher.model_dir),
                              "requests": teacher.requests})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != LOGPROBS_PATH:
                self._reply(404, {"error": f"no such path {self.path}; use POST {LOGPROBS_PATH}"})
                return
            try:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    raise BadRequest("Content-Length is not a number") from None
                if length > MAX_BODY_BYTES:
                    raise BodyTooLarge(f"body of {length} bytes is over the limit of {MAX_BODY_BYTES}")
                if length < 1:
                    raise BadRequest(f"Content-Length must be 1..{MAX_BODY_BYTES}")
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    raise BadRequest("body is not JSON") from None
                sequences, step = teacher.check(body)
            except BadRequest as exc:
                if isinstance(exc, BodyTooLarge):
                    self.close_connection = True  # the unread body must not be parsed as the next request
                self._reply(413 if isinstance(exc, BodyTooLarge) else 400, {"error": str(exc)})
                return
            teacher.maybe_die(step)
            teacher.maybe_misscore(step)
            started = time.perf_counter()
            logprobs = teacher.logprobs(sequences)
            if step is not None:
                log(f"step {step}: {len(sequences)} sequences in {1000 * (time.perf_counter() - started):.0f} ms")
            self._reply(200, {"name": teacher.name, "logprobs": logprobs})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # one line per scored step is logged above; access lines would drown it

        def log_error(self, format: str, *args: Any) -> None:  # noqa: A002
            log(f"{self.client_address[0]}: {format % args}")  # e.g. "Request timed out" for a stalled client

    return Handler


def _watch_parent(parent_pid: int) -> None:
    """Exit when the launcher is gone (re-parenting changes our parent pid)."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    try:
        log(f"launcher (pid {parent_pid}) is gone: exiting")
    finally:  # stdout may be a pipe that died with the launcher
        os._exit(0)


def write_port_file(path: Path, port: int, name: str) -> None:
    """``{"port", "pid", "name"}`` written to a temp file and renamed: readers never see half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"port": port, "pid": os.getpid(), "name": name}) + "\n", encoding="utf-8")
    tmp.replace(path)


def _initialise_afresh(model: Any, prefix: str) -> None:
    """The ``teacher-keys-renamed`` regression: the parameters under ``prefix`` as a checkpoint whose keys there were
    renamed loads them (missing keys, freshly initialised: normal(0, initializer_range), norms 1; seeded)."""
    import torch

    params = [(n, p) for n, p in model.named_parameters() if n.startswith(prefix)]
    if not params:
        raise SystemExit(f"error: --missing-keys {prefix}: names no parameter of the model (e.g. model.layers.1.)")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, p in params:
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=generator) * model.config.initializer_range)


def serve(args: argparse.Namespace) -> int:
    """Load the teacher, listen, report the port, serve until SIGTERM/SIGINT."""
    if args.parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(args.parent_pid,), daemon=True).start()
    started = time.perf_counter()
    if not args.temperature > 0:
        raise SystemExit(f"error: --temperature: must be positive (got {args.temperature})")
    teacher = Teacher(args.model, args.name, args.exit_at_step, args.temperature, args.misscore_from_step,
                      args.missing_keys)
    if not args.request_timeout_s > 0:
        raise SystemExit(f"error: --request-timeout-s: must be positive (got {args.request_timeout_s})")
    server = ThreadingHTTPServer((args.host, 0), make_handler(teacher, args.request_timeout_s))
    server.daemon_threads = True

    def stop(signum: int, _frame: Any) -> None:
        log(f"{signal.Signals(signum).name}: stopping")
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    write_port_file(args.port_file, port, args.name)
    log(f"teacher {args.name} ({args.model}) listening on http://{args.host}:{port} "
        f"(pid {os.getpid()}, loaded in {time.perf_counter() - started:.1f} s)")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m autotest.workloads.teacher_server",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True, help="checkpoint dir (config.json + safetensors)")
    p.add_argument("--name", required=True, help="teacher name, as in the endpoints JSON")
    p.add_argument("--port-file", type=Path, required=True, help="where the chosen port is written")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback by default)")
    p.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    p.add_argument("--exit-at-step", type=int, help="fault teacher-dies: exit on a request for step K or later")
    p.add_argument("--misscore-from-step", type=int,
                   help="fault teacher-misscore: score with unshifted logits from the step-K request on")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="log-probs of logits / T (regression teacher-temperature; 1 for a healthy teacher)")
    p.add_argument("--missing-keys", metavar="PREFIX",
                   help="regression teacher-keys-renamed: the parameters under PREFIX load as missing keys "
                        "(freshly initialised), as from a checkpoint whose keys there were renamed")
    p.add_argument("--request-timeout-s", type=float, default=REQUEST_TIMEOUT_S,
                   help="hang up on a client silent this long mid-request (default %(default)g)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    if not (args.model / "config.json").is_file():
        print(f"error: --model {args.model}: no config.json there; give a checkpoint dir", file=sys.stderr)
        return 2
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
