"""Racing admissions on real PostgreSQL: each thread has its own connection and transaction.

Eight requests of one GPU race for the last two GPUs of vision's H100 quota. With the
row lock, exactly two are admitted. The control runs show the race is real: the same
decision without the lock, with every read done before any write (a barrier makes the
interleaving certain, not likely), admits all eight.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from decimal import Decimal

import pytest
from django.db import IntegrityError, connections, transaction
from django.db.models import F

from quotas import approvals
from quotas.admission import QuotaRefused, admit
from quotas.models import Quota, QuotaRequest
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 8


def race(n: int, attempt) -> Counter:
    """Run ``attempt(barrier)`` in ``n`` threads at once; count what each returned or raised."""
    barrier = threading.Barrier(n, timeout=20)
    outcomes: Counter = Counter()
    lock = threading.Lock()

    def run():
        try:
            outcome = attempt(barrier)
        except Exception as exc:  # the outcome under test, counted by type
            outcome = type(exc).__name__
        finally:
            connections.close_all()
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    return outcomes


@pytest.fixture
def last_two_gpus(cast, catalog):
    """vision uses 6 of its 8 H100s."""
    return make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(6))


def test_with_the_lock_exactly_the_free_gpus_are_admitted(cast, catalog, last_two_gpus):
    def attempt(barrier):
        barrier.wait()
        with transaction.atomic():
            decision = admit(cast.vision, catalog["h100-80gb"], 1)
            time.sleep(0.02)  # a slow transaction holds the lock; the others wait, then count again
        return decision.admission

    outcomes = race(CLIENTS, attempt)
    assert outcomes == {"preemptible": 2, "QuotaRefused": CLIENTS - 2}
    assert Quota.objects.get(pk=last_two_gpus.pk).used == 8


def _unlocked_read(cast):
    return Quota.objects.get(team=cast.vision, gpu_class="H100-80GB")  # no SELECT ... FOR UPDATE


def test_control_without_the_lock_every_request_sees_two_free_gpus_and_all_are_admitted(cast, catalog, last_two_gpus):
    """Count-then-write without the lock: each writes what it counted plus one (a lost update)."""

    def attempt(barrier):
        with transaction.atomic():
            quota = _unlocked_read(cast)
            barrier.wait()  # every request has counted before any records
            if quota.used + 1 > quota.limit:
                raise QuotaRefused("over")
            Quota.objects.filter(pk=quota.pk).update(used=quota.used + 1)
        return "admitted"

    outcomes = race(CLIENTS, attempt)
    assert outcomes == {"admitted": CLIENTS}  # eight admitted into two free GPUs
    assert Quota.objects.get(pk=last_two_gpus.pk).used == 7  # and the books say only one was


def test_control_without_the_lock_the_check_constraint_is_the_last_guard(cast, catalog, last_two_gpus):
    """Count without the lock, record with an increment: the database refuses the third and later."""

    def attempt(barrier):
        with transaction.atomic():
            quota = _unlocked_read(cast)
            barrier.wait()
            if quota.used + 1 > quota.limit:
                raise QuotaRefused("over")
            Quota.objects.filter(pk=quota.pk).update(used=F("used") + 1)
        return "admitted"

    outcomes = race(CLIENTS, attempt)
    # The application decided to admit all eight; the constraint stopped six, as errors, not answers.
    assert outcomes == {"admitted": 2, IntegrityError.__name__: CLIENTS - 2}
    assert Quota.objects.get(pk=last_two_gpus.pk).used == 8


def test_two_admins_approving_one_request_at_once_apply_it_once(cast, catalog, last_two_gpus):
    from django.contrib.auth import get_user_model

    second_admin = get_user_model().objects.create_user("admin2", is_staff=True)
    request = QuotaRequest.objects.create(
        team=cast.vision, gpu_class="H100-80GB", limit=Decimal(12), justification="more", requested_by=cast.alice
    )
    admins = iter([cast.admin, second_admin])
    pick = threading.Lock()

    def attempt(barrier):
        with pick:
            actor = next(admins)
        barrier.wait()
        approvals.decide_request(actor, request.pk, approve=True, comment="ok")
        return "approved"

    outcomes = race(2, attempt)
    assert outcomes == {"approved": 1, "AlreadyDecided": 1}
    assert Quota.objects.get(pk=last_two_gpus.pk).limit == 12
    assert request.audit_entries.filter(action="request.approved").count() == 1
