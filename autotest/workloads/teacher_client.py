"""The student's side of the teacher servers: endpoints, routing, and log-prob requests.

Endpoints come as xtuner's ``XTUNER_OPD_TEACHER_ENDPOINTS_JSON``:
``{"teacher_name": ["http://host:port", ...], ...}`` (one URL per replica; requests go
round-robin over the replicas). Each sample carries its data source; the data-source ->
teacher map decides which teacher scores it (xtuner's ``data_source_teacher_map``).
Teachers are asked in parallel, one request per teacher per step.
"""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from autotest.errors import UsageError
from autotest.workloads.teacher_server import HEALTH_PATH, LOGPROBS_PATH

ENDPOINTS_ENV = "XTUNER_OPD_TEACHER_ENDPOINTS_JSON"


class TeacherError(RuntimeError):
    """A teacher did not answer (dead server, refused connection, bad reply)."""


def parse_endpoints(text: str, source: str = ENDPOINTS_ENV) -> dict[str, tuple[str, ...]]:
    """``{"name": ["http://host:port", ...]}`` validated; every mistake is one ``UsageError`` line."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc}); give {{\"name\": [\"http://host:port\"]}}") from None
    if not isinstance(data, dict) or not data:
        raise UsageError(f'{source}: must be a non-empty object {{"name": ["http://host:port", ...]}}')
    out = {}
    for name, urls in data.items():
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            raise UsageError(f"{source}: {name}: must be a non-empty list of URLs")
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
                raise UsageError(f"{source}: {name}: {url!r} is not http://host:port")
        out[name] = tuple(u.rstrip("/") for u in urls)
    return out


def dump_endpoints(endpoints: Mapping[str, Sequence[str]]) -> str:
    """The JSON text of ``endpoints`` (what the launcher exports)."""
    return json.dumps({name: list(urls) for name, urls in endpoints.items()})


def _post(url: str, body: dict, timeout_s: float) -> dict:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 (loopback http)
        return json.loads(reply.read())


def request_logprobs(base_url: str, sequences: Sequence[Sequence[int]], step: int | None = None,
                     timeout_s: float = 60.0) -> list[list[float]]:
    """Per-token log-probs of ``sequences`` from one server (``len - 1`` values each)."""
    body: dict = {"token_ids": [list(s) for s in sequences]}
    if step is not None:
        body["step"] = step
    try:
        reply = _post(base_url + LOGPROBS_PATH, body, timeout_s)
    except urllib.error.HTTPError as exc:
        with exc:  # an HTTPError holds the open reply
            detail = exc.read().decode(errors="replace")[:300]
        raise TeacherError(f"{base_url} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TeacherError(f"{base_url} did not answer: {reason}") from None
    logprobs = reply.get("logprobs") if isinstance(reply, dict) else None
    if not isinstance(logprobs, list) or len(logprobs) != len(sequences) or any(
            len(row) != len(seq) - 1 for row, seq in zip(logprobs, sequences)):
        raise TeacherError(f"{base_url} sent a reply of the wrong shape")
    return logprobs


def health(base_url: str, timeout_s: float = 2.0) -> dict:
    """The ``/health`` reply of one server."""
    with urllib.request.urlopen(base_url + HEALTH_PATH, timeout=timeout_s) as reply:  # noqa: S310
        return json.loads(reply.read())


@dataclass(frozen=True)
class Routing:
    """Which teacher scores which data source."""

    teacher_of: Mapping[str, str]
    """data source -> teacher name."""


class TeacherClient:
    """Scores batches of samples with the teacher of each sample's data source."""

    def __init__(self, endpoints: Mapping[str, Sequence[str]], routing: Routing, timeout_s: float = 60.0) -> None:
        missing = sorted(set(routing.teacher_of.values()) - set(endpoints))
        if missing:
            raise UsageError(f"{ENDPOINTS_ENV}: no endpoint for teacher(s) {', '.join(missing)} "
                             f"(have {', '.join(sorted(endpoints))}); start them or fix the teacher map")
        self.endpoints = {name: tuple(urls) for name, urls in endpoints.items()}
        self.routing = routing
        self.timeout_s = timeout_s
        self._next = {name: itertools.cycle(urls) for name, urls in self.endpoints.items()}
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.endpoints)), thread_name_prefix="teacher")

    def score(self, sources: Sequence[str], sequences: Sequence[Sequence[int]], step: int) -> list[list[float]]:
        """Per-token log-probs of each sequence from its source's teacher, in input order."""
        groups: dict[str, list[int]] = {}
        for i, source in enumerate(sources):
            if source not in self.routing.teacher_of:
                raise UsageError(f"data source {source!r} has no teacher in the teacher map")
            groups.setdefault(self.routing.teacher_of[source], []).append(i)
        futures = {name: self._pool.submit(self._ask, name, [sequences[i] for i in idx], step)
                   for name, idx in groups.items()}
        out: list[list[float]] = [[] for _ in sequences]
        for name, idx in groups.items():
            for i, row in zip(idx, futures[name].result(), strict=True):
                out[i] = row
        return out

    def _ask(self, name: str, sequences: list[Sequence[int]], step: int) -> list[list[float]]:
        url = next(self._next[name])
        try:
            return request_logprobs(url, sequences, step, self.timeout_s)
        except TeacherError as exc:
            raise TeacherError(f"teacher {name!r} failed at step {step}: {exc}") from None

    def close(self) -> None:
        """Stop the request threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
