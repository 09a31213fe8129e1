"""What went wrong talking to Kubernetes, in terms a task can act on.

Every failure of ``jobs.kube.client`` is a ``ClusterError`` that keeps the HTTP status,
the API's ``reason`` and ``message`` (the original ``ApiException`` or urllib3 error is
its ``__cause__``), and says with ``transient`` whether trying again later can help:

=============  ======  =========  =========================================================
class          status  transient  meaning and what the caller does
=============  ======  =========  =========================================================
Invalid        400/422 False      the object is wrong; show ``message`` / ``causes`` to the user
Unauthorized   401     False      the portal's credentials are wrong; an operator must fix them
Forbidden      403     False      RBAC or an admission rule (e.g. exceeded quota); message kept
NotFound       404     False      raised only where a caller asks for an object that must exist
Conflict       409     True       still conflicting after the client's own re-read-and-retry
Expired        410     True       a list continue token or watch resourceVersion is too old
WatchExpired   410     True       the watch's resourceVersion is too old: re-list, then watch
Throttled      429     True       retry after ``retry_after`` seconds (from ``Retry-After``)
Transient      5xx     True       server error, connection failure or timeout: back off
ClusterError   other   False      anything else (405, 415, ...): a bug, not a retry
=============  ======  =========  =========================================================

The client never sleeps: tasks retry with ``countdown=err.retry_after`` when it is set,
else ``backoff_seconds(attempt)``.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Mapping
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

# Throttled responses without a usable Retry-After wait this long.
DEFAULT_RETRY_AFTER = 1.0


class ClusterError(Exception):
    transient: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        # None when no HTTP response arrived (connection refused, timeout).
        self.status = status
        self.reason = reason
        self.message = message
        # Seconds the server asked us to wait, when it said so.
        self.retry_after = retry_after

    def __str__(self) -> str:
        code = f"{self.status} " if self.status is not None else ""
        reason = f"{self.reason}: " if self.reason else ""
        return f"{code}{reason}{self.message}"


class Invalid(ClusterError):
    """The API server rejected the object itself; sending it again will not help."""

    def __init__(self, message: str, *, causes: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        # (field, message) pairs, e.g. ("spec.trainer.numNodes", "Invalid value: 0: ...").
        self.causes = causes

    def __str__(self) -> str:
        # Users read this: the field-level causes, without status codes.
        return self.message


class Unauthorized(ClusterError):
    pass


class Forbidden(ClusterError):
    pass


class NotFound(ClusterError):
    pass


class Conflict(ClusterError):
    transient = True


class Expired(ClusterError):
    transient = True


class WatchExpired(Expired):
    """The watch's resourceVersion has been compacted away: list again and watch from the list."""


class Throttled(ClusterError):
    transient = True
    retry_after: float


class Transient(ClusterError):
    transient = True


_BY_STATUS: dict[int, type[ClusterError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
    429: Throttled,
}

# Everything urllib3 or the socket layer raises when no complete response arrived.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, OSError)


def from_api_exception(exc: ApiException) -> ClusterError:
    """Translate an ``ApiException``; the caller raises the result ``from exc``."""
    status_code = exc.status if isinstance(exc.status, int) and exc.status > 0 else None
    status = _status_body(exc.body)
    message = str(status.get("message") or exc.body or exc.reason or "no message")
    reason = str(status.get("reason") or exc.reason or "")
    raw_details = status.get("details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    retry_after = _retry_after(exc.headers, details)
    if status_code is None:
        # The client itself gave up before a response (e.g. a TLS handshake failure).
        return Transient(message, reason=reason, retry_after=retry_after)
    cls = _BY_STATUS.get(status_code) or (Transient if status_code >= 500 else ClusterError)
    if cls is Invalid:
        causes = _causes(details)
        return Invalid(
            _readable(message, causes),
            causes=causes,
            status=status_code,
            reason=reason,
            retry_after=retry_after,
        )
    if cls is Throttled:
        retry_after = DEFAULT_RETRY_AFTER if retry_after is None else retry_after
    return cls(message, status=status_code, reason=reason, retry_after=retry_after)


def from_transport_error(exc: BaseException) -> Transient:
    """Connection refused, reset, timed out or cut mid-response: no HTTP status to keep."""
    cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None else exc
    # urllib3 2 makes NewConnectionError (refused, unresolvable) a ConnectTimeoutError
    # for backwards compatibility; it is not a timeout.
    refused = isinstance(cause, urllib3.exceptions.NewConnectionError | ConnectionRefusedError)
    timed_out = not refused and isinstance(cause, urllib3.exceptions.TimeoutError | TimeoutError)
    reason = "Timeout" if timed_out else "ConnectionError"
    return Transient(f"{type(exc).__name__}: {exc}", reason=reason)


def _status_body(body: Any) -> dict[str, Any]:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _causes(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    causes = details.get("causes") or []
    out = []
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict):
            out.append((str(cause.get("field") or ""), str(cause.get("message") or cause.get("reason") or "")))
    return out


def _readable(message: str, causes: list[tuple[str, str]]) -> str:
    """ "spec.x: Invalid value: ..." per cause; the server's own message when there are none."""
    if not causes:
        return message
    parts = []
    for field, text in causes:
        # Schema errors often repeat the field in the text; do not print it twice.
        parts.append(text if not field or text.startswith(field) else f"{field}: {text}")
    return "; ".join(parts)


def _retry_after(headers: Mapping[str, str] | None, details: Mapping[str, Any]) -> float | None:
    """Seconds from ``Retry-After`` (delta-seconds or an HTTP date), else ``details.retryAfterSeconds``."""
    raw = headers.get("Retry-After") if headers is not None else None
    if raw:
        raw = raw.strip()
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    seconds = details.get("retryAfterSeconds")
    if isinstance(seconds, int | float) and seconds >= 0:
        return float(seconds)
    return None


def backoff_seconds(attempt: int, base: float = 2, cap: float = 300, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)].

    ``attempt`` counts from 0 (Celery's ``self.request.retries``). Full jitter spreads a
    burst of workers that failed together (an API server restart) instead of sending them
    back in lockstep.
    """
    ceiling = min(cap, base * 2 ** min(max(attempt, 0), 32))
    return (rng or random).uniform(0, ceiling)
