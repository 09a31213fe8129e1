"""Telling people things: a notice in the portal inbox and an email, sent after commit.

Anything that decides something for a user (an approval, an expiring grant, an idle
notebook, a budget) calls ``notify``; the user reads it at ``/notices/`` and the
navigation shows how many are unread. That count is on every page, so it is kept in the
cache (one key per user) instead of costing every page a query: ``notify`` and
``mark_read`` drop the key, and it expires after ``UNREAD_TTL`` seconds anyway, which
bounds how stale it can be where the process that notifies cannot reach the web
process's cache (development without Redis).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from portal.models import Notice

log = logging.getLogger(__name__)

UNREAD_TTL = 30  # seconds


def notify(user, subject: str, body: str = "", link: str = "") -> Notice:
    """Record a notice for ``user`` and email it once the transaction commits.

    A mail server being down must not undo the decision being announced, so the email
    goes after commit and a failure is logged, not raised; the in-portal notice stays.
    """
    notice = Notice.objects.create(user=user, subject=subject[:200], body=body, link=link)
    _forget_unread(user, also_after_commit=True)
    if user.email:

        def send():
            try:
                send_mail(subject, f"{body}\n\n{link}".strip(), settings.DEFAULT_FROM_EMAIL, [user.email])
            except Exception:  # any transport failure; the notice is already saved
                log.exception("could not email %s about %r", user.email, subject)

        transaction.on_commit(send)
    return notice


def inbox(user):
    """The user's notices, newest first. Nobody, platform admins included, reads another's."""
    return Notice.objects.filter(user=user).order_by("-created_at", "-id")


def mark_read(user, ids: Iterable[int] | None = None) -> int:
    """Mark the user's unread notices read (only ``ids``, when given); how many changed.

    Ids of other people's notices match nothing, so they change nothing.
    """
    unread = Notice.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=list(ids))
    changed = unread.update(read_at=timezone.now())
    _forget_unread(user, also_after_commit=True)
    return changed


def unread_count(user) -> int:
    """How many notices ``user`` has not read, from the cache when it is there."""
    key = _unread_key(user)
    try:
        cached = cache.get(key)
    except Exception:  # the cache is down: the count is worth one query, not an error page
        log.warning("unread count not cached: the cache did not answer", exc_info=True)
        return _count(user)
    if cached is not None:
        return int(cached)
    count = _count(user)
    try:
        cache.set(key, count, timeout=UNREAD_TTL)
    except Exception:
        log.warning("unread count not cached: the cache did not answer", exc_info=True)
    return count


def _count(user) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).count()


def _unread_key(user) -> str:
    # The join time makes the key unique to this account even when a database is rebuilt
    # and ids are used again (a test run), so a count never belongs to someone else.
    joined = int(user.date_joined.timestamp() * 1_000_000) if getattr(user, "date_joined", None) else 0
    return f"notices:unread:{user.pk}:{joined}"


def _forget_unread(user, *, also_after_commit: bool = False) -> None:
    """Drop the cached count now and, inside a transaction, again once it commits.

    Now: the rest of this request reads the new count. After commit: a page rendered by
    another request meanwhile may have cached the count from before the commit.
    """
    try:
        cache.delete(_unread_key(user))
    except Exception:
        log.warning("unread count not dropped: the cache did not answer", exc_info=True)
    if also_after_commit and transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: _forget_unread(user))
