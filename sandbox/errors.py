"""Kubernetes ``Status`` errors, worded like the real API server's.

Every failure the sandbox returns is an ``ApiError`` rendered as a ``v1 Status``
object so that the official client raises ``ApiException`` with the same status
code, reason and body a real cluster would give.
"""

from __future__ import annotations

from typing import Any

from sandbox.kinds import Kind

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(kind: Kind | None, name: str | None, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if kind is not None:
        if kind.group:
            details["group"] = kind.group
        details["kind"] = kind.plural
    details.update(extra)
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(404, f'{kind.resource_group} "{name}" not found', details=_details(kind, name))


def namespace_not_found(namespace: str) -> ApiError:
    return ApiError(404, f'namespaces "{namespace}" not found', details={"name": namespace, "kind": "namespaces"})


def already_exists(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409, f'{kind.resource_group} "{name}" already exists', "AlreadyExists", details=_details(kind, name)
    )


def conflict(kind: Kind, name: str, why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {kind.resource_group} "{name}": {why}',
        "Conflict",
        details=_details(kind, name),
    )


def invalid(kind: Kind, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 with one cause per problem; the message lists them as the real server does."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiError(
        422,
        f'{kind.kind_group} "{name}" is invalid: {joined}',
        "Invalid",
        details={
            **_details(None, name),
            **({"group": kind.group} if kind.group else {}),
            "kind": kind.kind,
            "causes": causes,
        },
    )


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def forbidden(kind: Kind, name: str, why: str) -> ApiError:
    return ApiError(403, f'{kind.resource_group} "{name}" is forbidden: {why}', details=_details(kind, name))


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, message)


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "Too many requests, please try again later.",
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal(
    message: str = 'an error on the server ("sandbox fault") has prevented the request from succeeding',
) -> ApiError:
    return ApiError(500, message, details={"causes": [{"reason": "UnexpectedServerResponse", "message": message}]})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized")
