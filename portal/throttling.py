"""API rate limits: one budget per API token (or per user for session calls), shared by every process.

The count lives in the default cache (Redis in production), so the web replicas and
their gunicorn workers draw from one budget. Fixed windows with an atomic increment
rather than DRF's sliding log: the log is read, appended and written back, so two
processes racing on one token both see room and the limit leaks under exactly the
load it exists for. The price of fixed windows is that a client may spend up to twice
the rate across a window boundary, which is acceptable for a guard against runaway
scripts.
"""

from __future__ import annotations

import logging
import math
import re
import time

from django.core.cache import cache
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from portal.models import ApiToken

log = logging.getLogger(__name__)

PERIODS = {
    **dict.fromkeys(("s", "sec", "second"), 1),
    **dict.fromkeys(("m", "min", "minute"), 60),
    **dict.fromkeys(("h", "hour"), 3600),
    **dict.fromkeys(("d", "day"), 86400),
}
RATE = re.compile(r"^(?P<count>\d+)/(?P<period>[a-z]+)$")


def parse_rate(rate: str) -> tuple[int, int]:
    """``"600/min"`` -> (600, 60). Raises ValueError on anything else."""
    match = RATE.match(rate.strip().lower())
    if not match or match["period"] not in PERIODS or int(match["count"]) < 1:
        raise ValueError(f"a rate is N/second, N/minute, N/hour or N/day (e.g. 600/min), not {rate!r}")
    return int(match["count"]), PERIODS[match["period"]]


class ApiRateThrottle(BaseThrottle):
    """``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["api"]`` requests per window and caller.

    The rate is read on every request (not at import, as DRF's SimpleRateThrottle does),
    so a changed setting applies without re-importing the class.
    """

    scope = "api"

    def __init__(self) -> None:
        self._wait = 0.0

    def allow_request(self, request, view) -> bool:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        if not rate:
            return True
        limit, period = parse_rate(rate)
        now = time.time()
        window = int(now // period)
        key = f"throttle:{self.scope}:{self.caller(request)}:{period}:{window}"
        try:
            # add() is a no-op when the key exists; incr() is atomic in Redis and LocMem.
            # The key outlives its window by a second so it cannot vanish between the two.
            cache.add(key, 0, timeout=period + 1)
            count = cache.incr(key)
        except Exception:
            # The cache is down or the key expired between add and incr. Failing open keeps
            # the API usable (reads still work without Redis); the limit is a guard, not a
            # security boundary, and authentication has already happened.
            log.warning("rate limit not applied: the cache did not answer", exc_info=True)
            return True
        if count <= limit:
            return True
        self._wait = (window + 1) * period - now
        return False

    def caller(self, request) -> str:
        if isinstance(request.auth, ApiToken):
            return f"token:{request.auth.pk}"
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return f"user:{user.pk}"
        return f"ip:{self.get_ident(request)}"

    def wait(self) -> int:
        # Whole seconds, rounded up: a client that waits exactly Retry-After is in the next window.
        return max(1, math.ceil(self._wait))
