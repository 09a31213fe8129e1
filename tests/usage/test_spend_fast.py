"""The fast spend computation gives exactly what the plain Decimal one gave (tests/usage/spend_reference.py)."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

import pytest

from jobs.models import Kind, State, Workload, WorkloadScale
from tests.usage import spend_reference as old
from tests.usage.conftest import at
from usage import spend
from usage.models import WorkloadDay, WorkloadRun

pytestmark = pytest.mark.django_db
START, END, NOW = at("2026-03-01 00:00:00"), at("2026-04-01 00:00:00"), at("2026-03-31 12:00:00")
LINE_FIELDS = (
    "workload_id",
    "workload_name",
    "team_id",
    "team_slug",
    "user_id",
    "username",
    "offering_id",
    "offering_slug",
    "gpu_class",
    "pool",
    "is_gpu",
    "day",
    "units",
    "share",
    "minutes",
    "price",
    "activity",
)


@pytest.fixture
def fixture(make_workload, cast, catalog):
    """150 workloads of every offering: runs across midnights and month ends, restarts,
    endpoints with replicas scaling up and down (several changes in one minute too), still
    running, odd seconds, measured and unmeasured days."""
    rng = random.Random(12)
    catalog["l4-shared"].price_per_hour = Decimal("0.1234")  # a price whose cents do not divide evenly
    catalog["l4-shared"].save()
    teams, users = [cast.vision, cast.nlp], [cast.alice, cast.bob, cast.carol]
    for _ in range(150):
        began = at("2026-02-27 00:00:00") + timedelta(seconds=rng.randrange(36 * 86400))
        finished = began + timedelta(seconds=rng.randrange(30, 4 * 86400)) if rng.random() < 0.85 else None
        kind = rng.choice([Kind.TRAINING, Kind.NOTEBOOK, Kind.ENDPOINT])
        w = make_workload(
            rng.choice(list(catalog)),
            team=rng.choice(teams),
            user=rng.choice(users),
            started=began,
            finished=finished,
            units=rng.choice((1, 2, 3, 8)),
            kind=kind,
            state=State.SUCCEEDED if finished else State.RUNNING,
            replicas=rng.choice((1, 2)),
        )
        if kind == Kind.ENDPOINT:
            Workload.objects.filter(pk=w.pk).update(max_replicas=rng.choice((2, 4)))
            when = (
                began - timedelta(seconds=rng.randrange(0, 600)) if rng.random() < 0.5 else began + timedelta(hours=2)
            )
            for _ in range(rng.randrange(0, 12)):
                WorkloadScale.objects.create(workload=w, started_at=when, replicas=rng.randrange(0, 5))
                when += timedelta(seconds=rng.choice((0, 7, 59, 60, 61, 600, 4000, 30000)))
        if rng.random() < 0.2:  # an earlier run of a restarted notebook
            WorkloadRun.objects.create(
                workload=w, started_at=began - timedelta(hours=30), finished_at=began - timedelta(hours=2, seconds=7)
            )
        d = (began - timedelta(hours=30)).date()
        while d <= (finished or NOW).date():
            if rng.random() < 0.8:
                n = rng.randrange(0, 2000)
                WorkloadDay.objects.create(
                    workload=w,
                    day=d,
                    team=w.team,
                    user=w.created_by,
                    offering=w.offering,
                    gpu_class="x",
                    device_minutes=n,
                    activity_minutes=n * rng.random(),
                )
            d += timedelta(days=1)


def test_lines_are_identical_to_the_plain_decimal_computation(fixture):
    new = spend.lines(START, END, now=NOW)
    ref = old.lines(START, END, now=NOW)
    assert len(new) == len(ref) > 250
    for a, b in zip(new, ref, strict=True):
        assert [getattr(a, f) for f in LINE_FIELDS] == [getattr(b, f) for f in LINE_FIELDS]
        assert (a.allocated, a.used, a.idle, a.gpu_hours) == (b.allocated, b.used, b.idle, b.gpu_hours)
    assert any(ln.activity is None for ln in new) and any((ln.activity or 0) > 0 for ln in new)
    per_day = [(ln.workload_id, ln.day) for ln in new]
    assert len(set(per_day)) < len(per_day)  # an endpoint that scaled has a line per count in a day


@pytest.mark.parametrize("by", list(spend.GROUPS))
def test_every_grouping_is_identical_to_the_plain_decimal_computation(fixture, by):
    new = spend.group(spend.lines(START, END, now=NOW), by)
    ref = old.group(old.lines(START, END, now=NOW), by)
    assert [t.key for t in new] == [t.key for t in ref]
    for a, b in zip(new, ref, strict=True):
        assert (a.label, a.minutes, a.workloads) == (b.label, b.minutes, b.workloads)
        assert (a.allocated, a.used, a.idle, a.gpu_hours, a.activity) == (
            b.allocated,
            b.used,
            b.idle,
            b.gpu_hours,
            b.activity,
        )
        assert (spend.money(a.allocated), spend.money(a.used)) == (spend.money(b.allocated), spend.money(b.used))


def test_a_price_with_more_than_four_decimals_is_still_exact():
    line = spend.Line(
        1, "w", 1, "t", 1, "u", 1, "o", "H100-80GB", "h100", True, START.date(), 3, 1, 7, Decimal("0.123456"), 0.5
    )
    assert line.alloc_units is None
    assert line.allocated == Decimal("0.123456") * 21 and line.used == (line.allocated * Decimal("0.5")).quantize(
        Decimal("0.000001")
    )
    total = spend.Total(1, "t")
    total.add(line)
    assert total.allocated == line.allocated and total.used == line.used


def test_used_cost_rounds_half_to_even_like_decimal_quantize():
    assert spend._half_even(25, 10) == 2 and spend._half_even(35, 10) == 4 and spend._half_even(36, 10) == 4
    assert spend._half_even(34, 10) == 3 and spend._half_even(0, 10) == 0


def test_activity_millionths_match_the_decimal_of_the_rounded_float():
    rng = random.Random(3)
    values = [rng.random() for _ in range(20000)] + [0.0, 1.0, 0.0000005, 0.0000015, 0.1234565, 2.5e-7, 0.9999995]
    for a in values:
        assert spend._activity_millionths(a) == int(Decimal(str(round(a, 6))).scaleb(6)), a
    assert spend._activity_millionths(-0.1) is None
