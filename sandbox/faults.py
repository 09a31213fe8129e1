"""Fault injection: make the next N matching API calls fail or hang.

A fault matches on verb (get, list, watch, create, update, patch, apply, delete,
deletecollection) and on kind (plural, singular, Kind or short name); either may be
left open. As in RBAC, where server-side apply is a "patch", the verb ``patch``
matches every PATCH request including apply, while ``apply`` matches only
server-side apply. Codes: 409 (Conflict), 422 (Invalid with one cause), 429 (TooManyRequests
with a Retry-After header), 500, 503, 504, or any other HTTP error code as a plain
Status. ``hang_seconds`` delays the answer (to trigger client timeouts); with a code
it hangs and then fails, without one it hangs and then answers normally.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from sandbox import errors
from sandbox.errors import ApiError, cause
from sandbox.kinds import Kind, matches_kind_filter

VERBS = ("get", "list", "watch", "create", "update", "patch", "apply", "delete", "deletecollection")


@dataclass
class Fault:
    code: int | None
    remaining: int
    verb: str | None = None
    kind: str | None = None
    retry_after: int | None = None
    hang_seconds: float | None = None


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Fault] = []

    def inject(
        self,
        code: int | None = None,
        count: int = 1,
        verb: str | None = None,
        kind: str | None = None,
        retry_after: int | None = None,
        hang_seconds: float | None = None,
    ) -> Fault:
        if code is None and not hang_seconds:
            raise ValueError("a fault needs a status code, hang_seconds, or both")
        if code is not None and not 400 <= int(code) <= 599:
            raise ValueError(f"fault code must be an HTTP error code, not {code}")
        if verb is not None and verb not in VERBS:
            raise ValueError(f"verb must be one of {', '.join(VERBS)}, not {verb!r}")
        if count < 1:
            raise ValueError("count must be at least 1")
        fault = Fault(
            int(code) if code is not None else None,
            int(count),
            verb,
            kind,
            int(retry_after) if retry_after is not None else None,
            float(hang_seconds) if hang_seconds else None,
        )
        with self._lock:
            self._items.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def take(self, verb: str, kind: Kind) -> Fault | None:
        with self._lock:
            for fault in self._items:
                verb_ok = fault.verb in (None, verb) or (fault.verb == "patch" and verb == "apply")
                if fault.remaining > 0 and verb_ok and matches_kind_filter(kind, fault.kind):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._items.remove(fault)
                    return fault
        return None

    def pending(self) -> list[dict]:
        with self._lock:
            return [asdict(f) for f in self._items]


def fault_error(fault: Fault, kind: Kind, name: str) -> ApiError:
    code = fault.code
    assert code is not None
    if code == 409:
        return errors.conflict(
            kind,
            name or "unknown",
            "the object has been modified; please apply your changes "
            "to the latest version and try again (injected fault)",
        )
    if code == 422:
        return errors.invalid(
            kind, name or "unknown", [cause("metadata.annotations", "Invalid value: injected validation fault")]
        )
    if code == 429:
        return errors.too_many_requests(fault.retry_after if fault.retry_after is not None else 1)
    if code == 500:
        return errors.internal()
    if code == 504:
        return ApiError(
            504, "The request did not complete in time (injected fault)", "Timeout", details={"retryAfterSeconds": 1}
        )
    if code == 503:
        return ApiError(
            503, "the server is currently unable to handle the request (injected fault)", "ServiceUnavailable"
        )
    return ApiError(code, f"injected fault {code}")
