"""Telling people things: a notice in the portal and an email, sent after commit."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from portal.models import Notice

log = logging.getLogger(__name__)


def notify(user, subject: str, body: str = "", link: str = "") -> Notice:
    """Record a notice for ``user`` and email it once the transaction commits.

    A mail server being down must not undo the decision being announced, so the email
    goes after commit and a failure is logged, not raised; the in-portal notice stays.
    """
    notice = Notice.objects.create(user=user, subject=subject[:200], body=body, link=link)
    if user.email:

        def send():
            try:
                send_mail(subject, f"{body}\n\n{link}".strip(), settings.DEFAULT_FROM_EMAIL, [user.email])
            except Exception:  # any transport failure; the notice is already saved
                log.exception("could not email %s about %r", user.email, subject)

        transaction.on_commit(send)
    return notice


def unread_count(user) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).count()
