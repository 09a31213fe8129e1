"""Is the cluster answering? What pages, the banner and /readyz know about it.

The answer is kept in the cache (Redis in production, so every web process and the
worker share it) and written by whoever last talked to the cluster: a page read (a
timeout marks it down at once, a success up), the ``jobs.check_cluster`` beat task every
30 s, and /readyz when the answer it finds is stale. Reading it never touches the
cluster, so the banner costs a page one cache GET, never a blocked request.

Users see a friendly sentence; the exception, with host names and paths, goes to the log.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from jobs.kube.client import Cluster, shared_cluster
from jobs.kube.errors import ClusterError

log = logging.getLogger(__name__)

# An answer older than this is not shown (the banner disappears rather than lie); the
# beat task refreshes it every CHECK_INTERVAL seconds.
STATUS_TTL = 120
CHECK_INTERVAL = 30
# /readyz probes the cluster itself when the last answer is older than this.
READY_MAX_AGE = 20
# After a failed read, pages do not ask again for this long: every panel of every open
# tab would otherwise wait out its timeout on each poll. Recovery shows within this time.
BACKOFF_SECONDS = 10

NOT_CONFIGURED = "not configured"


@dataclass(frozen=True)
class ClusterStatus:
    reachable: bool
    # Short and free of secrets: "timed out", "connection refused", "HTTP 503", ...
    reason: str
    checked_at: float

    @property
    def checked(self) -> datetime:
        return datetime.fromtimestamp(self.checked_at, tz=UTC)

    @property
    def age(self) -> float:
        return max(0.0, time.time() - self.checked_at)


def _key() -> str:
    # Per configured cluster: a portal (or a test) pointed elsewhere starts from "unknown".
    source = f"{settings.KUBE_CONFIG}|{settings.KUBE_CONTEXT or ''}"
    return "cluster-status:" + hashlib.sha256(source.encode()).hexdigest()[:16]


def reason_of(exc: BaseException) -> str:
    """What went wrong, in a few words fit for a banner and a probe body."""
    if isinstance(exc, ImproperlyConfigured):
        return NOT_CONFIGURED
    if isinstance(exc, ClusterError):
        if exc.status is None:
            return "timed out" if exc.reason == "Timeout" else "connection failed"
        return f"HTTP {exc.status}" + (f" {exc.reason}" if exc.reason else "")
    return type(exc).__name__


def record(reachable: bool, reason: str = "") -> ClusterStatus:
    status = ClusterStatus(reachable=reachable, reason="" if reachable else reason, checked_at=time.time())
    try:
        # A plain dict, not a pickled class: a deploy that changes the class cannot break reads.
        cache.set(_key(), {"reachable": status.reachable, "reason": status.reason, "at": status.checked_at}, STATUS_TTL)
    except Exception:  # a cache outage must not break the page that only wanted to note this
        log.warning("could not record the cluster status in the cache", exc_info=True)
    return status


def current() -> ClusterStatus | None:
    """The last known answer, or None when nobody asked the cluster recently."""
    try:
        raw = cache.get(_key())
        if raw is None:
            return None
        return ClusterStatus(reachable=bool(raw["reachable"]), reason=str(raw["reason"]), checked_at=float(raw["at"]))
    except Exception:
        log.warning("could not read the cluster status from the cache", exc_info=True)
        return None


def probe() -> ClusterStatus:
    """Ask the cluster now (one ``GET /version`` with the page timeouts) and record the answer."""
    try:
        shared_cluster().ping()
    except (ClusterError, ImproperlyConfigured) as exc:
        log.warning("the cluster is not answering: %s", exc)
        return record(False, reason_of(exc))
    return record(True)


def fresh(max_age: float = READY_MAX_AGE) -> ClusterStatus:
    """The recorded answer when it is recent enough, else a new probe."""
    status = current()
    if status is not None and status.age <= max_age:
        return status
    return probe()


def _sentence(reason: str, what: str) -> str:
    if reason == NOT_CONFIGURED:
        return "The portal has no cluster to ask right now; the details are in the server log."
    return (
        f"The cluster is not answering right now ({reason}), so the {what} cannot be shown. "
        "The page tries again by itself; the details are in the server log."
    )


def page_cluster(what: str) -> tuple[Cluster | None, str]:
    """The shared client for a page read of ``what``, or (None, the sentence to show instead).

    No client while the cluster failed a read less than ``BACKOFF_SECONDS`` ago: the
    panel says so at once instead of waiting for another timeout.
    """
    status = current()
    if status is not None and not status.reachable and status.age < BACKOFF_SECONDS:
        return None, _sentence(status.reason, what)
    try:
        return shared_cluster(), ""
    except ImproperlyConfigured as exc:
        return None, unavailable(exc, what)


def unavailable(exc: BaseException, what: str) -> str:
    """Note a failed page read (logged, recorded) and return the sentence the panel shows.

    Only failures that say the cluster is unwell mark it down: a 404 or a 403 is an
    answer, and an ``Invalid`` from a container that has not started is normal.
    """
    log.warning("reading the %s from the cluster failed: %s", what, exc)
    if isinstance(exc, ImproperlyConfigured):
        record(False, NOT_CONFIGURED)
        return _sentence(NOT_CONFIGURED, what)
    if isinstance(exc, ClusterError) and (exc.status is None or exc.status >= 500 or exc.status == 429):
        reason = reason_of(exc)
        record(False, reason)
        return _sentence(reason, what)
    return f"The cluster would not show the {what} ({reason_of(exc)}); the details are in the server log."


def answered() -> None:
    """A page read succeeded: the cluster is up (written only when that is news or getting old)."""
    status = current()
    if status is None or not status.reachable or status.age > CHECK_INTERVAL:
        record(True)


def readiness() -> str | None:
    """The /readyz check: why the cluster is not usable, or None (a recent answer, else a probe)."""
    status = fresh()
    return None if status.reachable else status.reason


def banner(request) -> dict:
    """Context processor: ``cluster_down`` (a ClusterStatus) while the cluster is known to be unreachable.

    Reads the cache only; a cluster nobody asked recently shows no banner rather than a
    blocked page.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    status = current()
    return {"cluster_down": status} if status is not None and not status.reachable else {}
