"""The mapping from API answers to ClusterError classes, without any HTTP."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from jobs.kube.errors import (
    ClusterError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    Throttled,
    Transient,
    Unauthorized,
    WatchExpired,
    backoff_seconds,
    from_api_exception,
    from_transport_error,
)
from tests.kube_client.fake_api import status_body


def api_exception(code: int, reason: str = "", message: str = "m", headers=None, **details) -> ApiException:
    exc = ApiException(status=code, reason=reason, body=json.dumps(status_body(code, reason, message, **details)))
    exc.headers = headers
    return exc


@pytest.mark.parametrize(
    ("code", "cls", "transient"),
    [
        (400, Invalid, False),
        (401, Unauthorized, False),
        (403, Forbidden, False),
        (404, NotFound, False),
        (405, ClusterError, False),
        (409, Conflict, True),
        (410, Expired, True),
        (422, Invalid, False),
        (429, Throttled, True),
        (500, Transient, True),
        (503, Transient, True),
        (504, Transient, True),
    ],
)
def test_each_status_maps_to_a_class_that_says_whether_to_retry(code, cls, transient):
    error = from_api_exception(api_exception(code, "Reason"))

    assert type(error) is cls
    assert error.transient is transient
    assert error.status == code
    assert error.reason == "Reason"


def test_watch_expired_is_an_expired_that_a_task_may_retry():
    assert issubclass(WatchExpired, Expired)
    assert WatchExpired("gone", status=410).transient is True


def test_invalid_reads_as_field_and_message_per_cause():
    error = from_api_exception(
        api_exception(
            422,
            "Invalid",
            'TrainJob.trainer.kubeflow.org "run-1" is invalid: spec.trainer.numNodes: Invalid value: 0: ...',
            causes=[
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.trainer.numNodes",
                    "message": "Invalid value: 0: must be >= 1",
                },
                {"reason": "FieldValueRequired", "field": "spec.runtimeRef.name", "message": "Required value"},
            ],
        )
    )

    assert isinstance(error, Invalid)
    assert error.causes == [
        ("spec.trainer.numNodes", "Invalid value: 0: must be >= 1"),
        ("spec.runtimeRef.name", "Required value"),
    ]
    assert (
        error.message == "spec.trainer.numNodes: Invalid value: 0: must be >= 1; spec.runtimeRef.name: Required value"
    )
    assert str(error) == error.message


def test_invalid_does_not_repeat_a_field_the_cause_message_already_names():
    error = from_api_exception(
        api_exception(
            422, "Invalid", "x", causes=[{"field": "spec.a", "message": "spec.a in body must be of type integer"}]
        )
    )

    assert error.message == "spec.a in body must be of type integer"


def test_invalid_without_causes_keeps_the_server_message():
    error = from_api_exception(api_exception(400, "BadRequest", 'strict decoding error: unknown field "spec.foo"'))

    assert isinstance(error, Invalid)
    assert error.causes == []
    assert error.message == 'strict decoding error: unknown field "spec.foo"'


def test_forbidden_keeps_the_quota_message():
    message = 'pods "p" is forbidden: exceeded quota: gpu, requested: nvidia.com/gpu=8, used: 0, limited: 4'
    error = from_api_exception(api_exception(403, "Forbidden", message))

    assert error.message == message
    assert str(error) == f"403 Forbidden: {message}"


def test_retry_after_comes_from_the_header_in_seconds():
    error = from_api_exception(api_exception(429, "TooManyRequests", headers={"Retry-After": "7"}))

    assert isinstance(error, Throttled)
    assert error.retry_after == 7.0


def test_retry_after_may_be_an_http_date():
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    error = from_api_exception(api_exception(429, "TooManyRequests", headers={"Retry-After": when}))

    assert 25 <= error.retry_after <= 30


def test_retry_after_falls_back_to_the_status_details():
    error = from_api_exception(api_exception(429, "TooManyRequests", retryAfterSeconds=4))

    assert error.retry_after == 4.0


def test_a_throttle_without_any_retry_after_waits_one_second():
    error = from_api_exception(api_exception(429, "TooManyRequests", headers={"Retry-After": "soon"}))

    assert error.retry_after == 1.0


def test_a_server_error_keeps_a_retry_after_when_the_server_gives_one():
    error = from_api_exception(api_exception(503, "ServiceUnavailable", headers={"Retry-After": "3"}))

    assert isinstance(error, Transient)
    assert error.retry_after == 3.0


def test_a_body_that_is_not_a_status_is_kept_as_the_message():
    exc = ApiException(status=502, reason="Bad Gateway", body="<html>upstream down</html>")

    error = from_api_exception(exc)

    assert isinstance(error, Transient)
    assert error.reason == "Bad Gateway"
    assert error.message == "<html>upstream down</html>"


def test_an_api_exception_without_a_status_is_transient():
    error = from_api_exception(ApiException(status=0, reason="SSLError\nhandshake failed"))

    assert isinstance(error, Transient)
    assert error.status is None


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (urllib3.exceptions.ReadTimeoutError(None, "/x", "read timed out"), "Timeout"),
        (TimeoutError("timed out"), "Timeout"),
        (urllib3.exceptions.ProtocolError("Connection aborted."), "ConnectionError"),
        (urllib3.exceptions.MaxRetryError(None, "/x", ConnectionRefusedError()), "ConnectionError"),
        (ConnectionResetError(104, "reset"), "ConnectionError"),
    ],
)
def test_transport_failures_are_transient_without_a_status(exc, reason):
    error = from_transport_error(exc)

    assert isinstance(error, Transient)
    assert error.transient is True
    assert error.status is None
    assert error.reason == reason


def test_backoff_grows_exponentially_within_full_jitter_bounds():
    rng = random.Random(1)
    for attempt, ceiling in [(0, 2), (1, 4), (2, 8), (5, 64)]:
        samples = [backoff_seconds(attempt, rng=rng) for _ in range(200)]
        assert all(0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling * 0.8  # the whole range is used, not just the top


def test_backoff_is_capped_even_for_absurd_attempt_numbers():
    assert all(backoff_seconds(10_000, base=2, cap=300) <= 300 for _ in range(100))
    assert backoff_seconds(-3, rng=random.Random(0)) <= 2
