"""Failed password logins: a budget per username and per client address, counted in the shared cache.

Every password attempt is counted *before* the password is checked, with an atomic
increment, so parallel guesses cannot all slip past a check that has not seen the others
yet; a successful login takes its attempt back (the username's count is cleared, the
address's decremented), so only failures use the budget. An attempt over either budget is
refused without looking at the password until the window ends. The window starts at the
first counted attempt and lasts ``LOGIN_LOCKOUT_SECONDS``.

Trade-offs accepted:
- Anyone can lock a username out for one window by guessing at it (what every lockout
  allows); SSO logins are not affected, and a platform admin can still sign in as
  someone else. The per-address budget is larger than the per-username one, since a
  whole office may sit behind one address.
- With no Redis (development) the counts live in each process's memory; `make run` has
  one web process, so that is still one budget.
- If the cache does not answer, logins are not limited (logged): Redis being down must
  not lock everyone out of the portal.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Why an attempt was refused, and for how long."""

    scope: str  # "username" or "address"
    retry_after: int  # seconds

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after / 60))
        who = "for this username" if self.scope == "username" else "from your network address"
        return (
            f"Too many failed logins {who}: login is locked for {minutes} minute{'s' if minutes != 1 else ''}. "
            "Try again later, or sign in with SSO if your organisation offers it."
        )


def client_address(request) -> str:
    """The caller's address: ``REMOTE_ADDR``, or the ``X-Forwarded-For`` entry our own proxies added.

    With ``LOGIN_TRUSTED_PROXIES`` = N, the N-th address from the right of
    X-Forwarded-For is the client as the outermost trusted proxy saw it; entries left of
    it are whatever the client sent and are ignored. Without trusted proxies the header
    is ignored entirely, since anyone can send it.
    """
    proxies = settings.LOGIN_TRUSTED_PROXIES
    if proxies:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _budgets(request, username: str) -> list[tuple[str, str, int]]:
    """(scope, cache key, limit) for each budget that is on; a limit of 0 switches one off."""
    # Hashed: a username is user input of any length and characters, a cache key is not.
    name = hashlib.sha256(username.strip().casefold().encode()).hexdigest()[:32]
    address = hashlib.sha256(client_address(request).encode()).hexdigest()[:32]
    budgets = [
        ("username", f"login-fail:user:{name}", settings.LOGIN_MAX_FAILURES),
        ("address", f"login-fail:ip:{address}", settings.LOGIN_MAX_FAILURES_PER_IP),
    ]
    return [b for b in budgets if b[2] > 0]


def _count(key: str, window: int, now: float) -> int:
    """Add one attempt to ``key``'s window; the window's end is kept next to the count."""
    # add() does nothing when the key exists; incr() is atomic in Redis and LocMem.
    if cache.add(key, 0, timeout=window):
        cache.set(f"{key}:until", now + window, timeout=window)
    try:
        return cache.incr(key)
    except ValueError:  # the window ended between add() and incr(): this is the first of a new one
        cache.add(key, 0, timeout=window)
        cache.set(f"{key}:until", now + window, timeout=window)
        return cache.incr(key)


def attempt(request, username: str) -> Refusal | None:
    """Count a password attempt; a Refusal when it is over a budget (then do not check the password)."""
    window = settings.LOGIN_LOCKOUT_SECONDS
    now = time.time()
    try:
        for scope, key, limit in _budgets(request, username):
            if _count(key, window, now) > limit:
                until = cache.get(f"{key}:until") or now + window
                log.warning("login refused: %s budget spent (%s failures)", scope, limit)
                return Refusal(scope, max(1, math.ceil(until - now)))
    except Exception:
        log.warning("login attempts not limited: the cache did not answer", exc_info=True)
    return None


def succeeded(request, username: str) -> None:
    """A correct password: clear the username's failures and take this attempt off the address's count."""
    try:
        for scope, key, _ in _budgets(request, username):
            if scope == "username":
                cache.delete_many([key, f"{key}:until"])
            else:
                try:
                    cache.decr(key)
                except ValueError:  # the window ended meanwhile: nothing to take back
                    pass
    except Exception:
        log.warning("login attempts not cleared: the cache did not answer", exc_info=True)
