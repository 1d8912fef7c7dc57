"""The student's side of the teachers: endpoints JSON, routing by data source over real HTTP, failures."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teacher_client import (  # noqa: E402
    Routing,
    TeacherClient,
    TeacherError,
    request_logprobs,
)
from autotest.workloads.teachers import Fixture, teacher_name  # noqa: E402
from tests.unit.workloads.test_teacher_client import ROUTING

from .test_teacher_server import Served, reference_logprobs, start_server, stop  # noqa: E402

#: real teacher servers over trained teachers (~20 s of setup on 2 cores);
#: out of the quick tier, `pytest -m "not slow"`
pytestmark = pytest.mark.slow


def test_a_closed_port_is_a_teacher_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TeacherError, match=rf"^http://127.0.0.1:{port} did not answer: .*refused"):
        request_logprobs(f"http://127.0.0.1:{port}", [[1, 2]], timeout_s=2)


def _batch() -> tuple[list[str], list[list[int]]]:
    sources, seqs = [], []
    for i, domain in enumerate(["digit_sum", "digit_product", "digit_sum", "digit_product", "digit_sum"]):
        task = get_task(domain)
        target = task.train_targets[i % len(task.train_targets)]
        sources.append(domain)
        seqs.append(list(task.prompt(target).token_ids) + [i % 10, 3, 11])
    return sources, seqs


def test_each_sample_is_scored_by_its_domains_teacher(teacher_servers: dict[str, Served], mopd_fixture: Fixture) -> None:
    # each teacher's reference: a plain-torch forward of its weights file, not the server's loading and model class
    checkpoints = {teacher_name(d): mopd_fixture.teacher(d) for d in mopd_fixture.domains}
    sources, seqs = _batch()
    client = TeacherClient({name: (s.url,) for name, s in teacher_servers.items()}, ROUTING)
    try:
        scored = client.score(sources, seqs, step=1)
    finally:
        client.close()
    for source, seq, got in zip(sources, seqs, scored, strict=True):
        own = reference_logprobs(checkpoints[ROUTING.teacher_of[source]], seq)
        other = reference_logprobs(checkpoints[next(n for n in checkpoints if n != ROUTING.teacher_of[source])], seq)
        assert got == pytest.approx(own, abs=1e-5)
        assert got != pytest.approx(other, abs=1e-3)
    # swapped endpoints: the same request is answered by the other teacher
    swapped = TeacherClient({"digit_sum_teacher": (teacher_servers["digit_product_teacher"].url,),
                             "digit_product_teacher": (teacher_servers["digit_sum_teacher"].url,)}, ROUTING)
    try:
        crossed = swapped.score(sources, seqs, step=1)
    finally:
        swapped.close()
    for source, seq, got in zip(sources, seqs, crossed, strict=True):
        other = next(n for n in checkpoints if n != ROUTING.teacher_of[source])
        assert got == pytest.approx(reference_logprobs(checkpoints[other], seq), abs=1e-5)


def test_replicas_are_used_round_robin(teacher_servers: dict[str, Served]) -> None:
    from autotest.workloads.teacher_client import health

    urls = [served.url for served in teacher_servers.values()]  # two servers standing in for two replicas
    before = [health(url)["requests"] for url in urls]
    client = TeacherClient({"digit_sum_teacher": tuple(urls)}, Routing({"digit_sum": "digit_sum_teacher"}))
    try:
        for step in range(4):
            client.score(["digit_sum"], [[10, 14, 0, 5, 2, 3, 11]], step)
    finally:
        client.close()
    assert [health(url)["requests"] - b for url, b in zip(urls, before)] == [2, 2]


def test_a_rejected_request_is_a_teacher_error_with_the_servers_reason(teacher_servers: dict[str, Served]) -> None:
    url = teacher_servers["digit_sum_teacher"].url
    with pytest.raises(TeacherError, match=rf'^{url} answered HTTP 400: {{"error": "token_ids\[0\] must be a list '
                                           r'of 2\.\.32 ids"}$'):
        request_logprobs(url, [[1]])


def test_an_unknown_data_source_is_a_usage_error(teacher_servers: dict[str, Served]) -> None:
    client = TeacherClient({name: (s.url,) for name, s in teacher_servers.items()}, ROUTING)
    try:
        with pytest.raises(UsageError, match=r"^data source 'geo3k' has no teacher in the teacher map$"):
            client.score(["geo3k"], [[1, 2]], step=1)
    finally:
        client.close()


def test_a_dead_teacher_names_itself_and_the_step(mopd_fixture: Fixture, tmp_path: Path) -> None:
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path, "digit_sum_teacher")
    stop(served)
    client = TeacherClient({"digit_sum_teacher": (served.url,)}, Routing({"digit_sum": "digit_sum_teacher"}))
    try:
        with pytest.raises(TeacherError, match=rf"^teacher 'digit_sum_teacher' failed at step 7: {served.url} "
                                               r"did not answer: "):
            client.score(["digit_sum"], [[10, 14, 0, 5, 2, 3, 11]], step=7)
    finally:
        client.close()
