"""The student's side of the teachers without a server: the endpoints JSON and its one-line errors."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.teacher_client import (  # noqa: E402
    ENDPOINTS_ENV,
    Routing,
    TeacherClient,
    dump_endpoints,
    parse_endpoints,
)

ROUTING = Routing({"digit_sum": "digit_sum_teacher", "digit_product": "digit_product_teacher"})


def test_endpoints_json_round_trip_in_xtuner_shape() -> None:
    endpoints = {"digit_sum_teacher": ["http://127.0.0.1:4001/", "http://127.0.0.1:4002"],
                 "digit_product_teacher": ["http://localhost:4003"]}
    parsed = parse_endpoints(dump_endpoints(endpoints))
    assert parsed == {"digit_sum_teacher": ("http://127.0.0.1:4001", "http://127.0.0.1:4002"),
                      "digit_product_teacher": ("http://localhost:4003",)}
    assert parse_endpoints(dump_endpoints(parsed)) == parsed
    assert ENDPOINTS_ENV == "XTUNER_OPD_TEACHER_ENDPOINTS_JSON"


@pytest.mark.parametrize("text, message", [
    ("{", r"not valid JSON"),
    ("[]", r'must be a non-empty object \{"name": \["http://host:port", \.\.\.\]\}'),
    ("{}", r"must be a non-empty object"),
    ('{"t": "http://127.0.0.1:1"}', r"t: must be a non-empty list of URLs"),
    ('{"t": []}', r"t: must be a non-empty list of URLs"),
    ('{"t": ["https://127.0.0.1:1"]}', r"t: 'https://127.0.0.1:1' is not http://host:port"),
    ('{"t": ["http://127.0.0.1"]}', r"t: 'http://127.0.0.1' is not http://host:port"),
    ('{"t": ["http://127.0.0.1:1/v1"]}', r"t: 'http://127.0.0.1:1/v1' is not http://host:port"),
])
def test_bad_endpoints_are_one_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=rf"^{ENDPOINTS_ENV}: {message}"):
        parse_endpoints(text)


def test_a_teacher_without_endpoint_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"no endpoint for teacher\(s\) digit_product_teacher \(have "
                                         r"digit_sum_teacher\); start them or fix the teacher map$"):
        TeacherClient({"digit_sum_teacher": ("http://127.0.0.1:1",)}, ROUTING)
