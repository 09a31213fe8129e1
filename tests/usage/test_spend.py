"""Cost math: minutes, days, months, MIG slices, used vs idle, and exact conservation."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from jobs.models import Kind, State, WorkloadEvent
from tests.usage.conftest import at, nodes_seen_since
from usage import spend
from usage.models import WorkloadDay


def test_a_run_is_charged_from_its_start_minute_to_its_end_minute_rounded_up(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 10:00:40", finished="2026-03-02 10:02:05")
    cost = spend.workload_cost(w, now=at("2026-03-03 00:00:00"))
    assert cost.minutes == 3  # 10:00, 10:01, 10:02
    assert cost.allocated == Decimal("12")  # price-minutes: 4.00/h × 1 GPU × 3 min
    assert spend.money(cost.allocated) == Decimal("0.20")


def test_minute_aligned_runs_are_charged_exactly_and_short_runs_one_minute():
    assert spend.held_interval(at("2026-03-02 10:00:00"), at("2026-03-02 10:02:00"), None) == (
        at("2026-03-02 10:00:00"),
        at("2026-03-02 10:02:00"),
    )
    start, end = spend.held_interval(at("2026-03-02 10:00:10"), at("2026-03-02 10:00:20"), None)
    assert (end - start).total_seconds() == 60


def test_a_running_workload_is_charged_up_to_now_rounded_up(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 10:00:00", units=2)
    cost = spend.workload_cost(w, now=at("2026-03-02 10:29:01"))
    assert cost.minutes == 30
    assert spend.money(cost.allocated) == Decimal("4.00")  # 2 GPUs × 4.00/h × 0.5 h


def test_a_run_across_midnight_is_split_at_midnight_and_adds_up(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 23:59:30", finished="2026-03-03 00:01:10")
    lines = spend.lines(at("2026-03-01 00:00:00"), at("2026-03-05 00:00:00"), now=at("2026-03-05 00:00:00"))
    assert [(ln.day, ln.minutes) for ln in lines if ln.workload_id == w.pk] == [
        (date(2026, 3, 2), 1),
        (date(2026, 3, 3), 2),
    ]
    assert spend.workload_cost(w, now=at("2026-03-05 00:00:00")).minutes == 3


def test_a_run_across_a_month_end_is_charged_to_each_month(make_workload, cast):
    make_workload("h100-80gb", started="2026-01-31 23:30:00", finished="2026-02-01 00:30:00", units=2)
    jan = spend.lines(at("2026-01-01 00:00:00"), at("2026-02-01 00:00:00"), now=at("2026-03-01 00:00:00"))
    feb = spend.lines(at("2026-02-01 00:00:00"), at("2026-03-01 00:00:00"), now=at("2026-03-01 00:00:00"))
    assert sum(ln.minutes for ln in jan) == 30 and sum(ln.minutes for ln in feb) == 30
    assert spend.money(spend.team_month_spend(cast.vision, now=at("2026-02-10 00:00:00"))) == Decimal("4.00")
    assert spend.money(spend.team_month_spend(cast.vision, now=at("2026-01-31 23:59:59"))) == Decimal("4.00")


def test_a_mig_slice_costs_a_seventh_of_the_a100_price(make_workload, catalog):
    assert catalog["a100-80gb-1g.10gb"].price_per_hour == Decimal("2.80") / 7
    one = make_workload("a100-80gb-1g.10gb", started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00")
    seven = make_workload("a100-80gb-1g.10gb", started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00", units=7)
    now = at("2026-03-03 00:00:00")
    assert spend.money(spend.workload_cost(one, now).allocated) == Decimal("0.40")
    assert spend.money(spend.workload_cost(seven, now).allocated) == Decimal("2.80")
    assert float(spend.workload_cost(seven, now).gpu_hours) == pytest.approx(1.0)


def test_used_cost_follows_measured_activity_and_idle_is_the_rest(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 10:00:00", finished="2026-03-02 12:00:00")
    WorkloadDay.objects.create(
        workload=w,
        day=date(2026, 3, 2),
        team=w.team,
        user=w.created_by,
        offering=w.offering,
        gpu_class="H100-80GB",
        device_minutes=120,
        activity_minutes=30.0,
    )
    cost = spend.workload_cost(w, now=at("2026-03-03 00:00:00"))
    assert spend.money(cost.allocated) == Decimal("8.00")
    assert spend.money(cost.used) == Decimal("2.00")
    assert spend.money(cost.idle) == Decimal("6.00")
    assert cost.used + cost.idle == cost.allocated


def test_every_cent_of_the_cluster_cost_goes_to_a_team_or_to_cluster_idle(make_workload, cast):
    make_workload("h100-80gb", started="2026-03-02 09:59:59", finished="2026-03-02 17:00:01", units=3)
    make_workload("a100-80gb-1g.10gb", team=cast.nlp, user=cast.bob, started="2026-03-01 22:13:17", units=5)
    make_workload(
        "l4-shared", team=cast.nlp, user=cast.carol, started="2026-03-02 05:00:30", finished="2026-03-02 05:07:00"
    )
    make_workload("h100-80gb-dra", started="2026-03-02 23:10:00", finished="2026-03-03 02:00:00", units=8)
    make_workload("cpu", started="2026-03-02 01:00:00", finished="2026-03-02 03:00:00")  # no GPU: not in the account
    nodes_seen_since("2026-02-01 00:00:00")
    account = spend.cluster_account(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00"), now=at("2026-03-04 00:00:00"))
    # 16 + 8 H100 at 4.00, 8 A100 at 2.80, 8 L4 at 0.80: 124.80 per hour.
    assert spend.money(account.cost) == Decimal("124.80") * 24
    assert account.allocated + account.idle == account.cost  # exact, in Decimal price-minutes
    assert sum(account.by_team.values()) + account.idle == account.cost
    assert sum(a for _, a in account.by_pool.values()) == account.allocated
    shown = account.shown()
    assert sum(shown.values()) == spend.money(account.cost)  # rounded parts add up to the rounded total
    # vision: 3 H100 × 422 min (the minutes 09:59 to 17:00, both touched) + 8 × 50 min on the DRA pool, at 4.00/h
    assert account.by_team[cast.vision.pk] == Decimal("4.0000") * (3 * 422 + 8 * 50)
    # nlp: 5 slices all day at 0.40 + 1 L4 share for 7 minutes at 0.20
    assert account.by_team[cast.nlp.pk] == Decimal("0.4000") * 5 * 1440 + Decimal("0.2000") * 7


def test_rounded_parts_add_up_to_the_rounded_total():
    parts = {"a": Decimal("1"), "b": Decimal("1"), "c": Decimal("1")}  # 1/60 each: 0.0166…
    shown = spend.split_cents(parts)
    assert sum(shown.values()) == spend.money(Decimal(3)) == Decimal("0.05")
    assert sorted(shown.values()) == [Decimal("0.01"), Decimal("0.02"), Decimal("0.02")]


def test_the_estimate_gives_the_hourly_rate_and_the_cost_of_the_maximum_runtime(catalog):
    est = spend.estimate(catalog["h100-80gb"], 2, 90 * 60)
    assert (est.per_hour, est.total, est.minutes) == (Decimal("8.00"), Decimal("12.00"), 90)
    est = spend.estimate(catalog["a100-80gb-1g.10gb"], 1, 3601)  # 61 started minutes
    assert (est.per_hour, est.total) == (Decimal("0.40"), Decimal("0.41"))
    assert spend.estimate(catalog["h100-80gb"], 1, None).total is None


def test_an_earlier_run_of_a_restarted_notebook_is_still_charged(make_workload):
    w = make_workload("h100-80gb", kind=Kind.NOTEBOOK, started="2026-03-02 10:00:00", state=State.RUNNING)
    WorkloadEvent.objects.create(workload=w, to_state=State.RUNNING, message="Running.")
    w.state, w.finished_at = State.STOPPED, at("2026-03-02 11:00:00")
    w.save()
    WorkloadEvent.objects.create(workload=w, from_state=State.RUNNING, to_state=State.STOPPED, message="Stopped.")
    # Started again: the row forgets the first run (jobs.lifecycle.start clears both times).
    w.state, w.started_at, w.finished_at = State.RUNNING, at("2026-03-02 12:00:00"), None
    w.save()
    WorkloadEvent.objects.create(workload=w, from_state=State.SUBMITTED, to_state=State.RUNNING, message="Running.")
    cost = spend.workload_cost(w, now=at("2026-03-02 12:30:00"))
    assert cost.minutes == 60 + 30


def test_the_request_form_can_fetch_the_estimate_as_a_fragment(client, cast, catalog):
    client.force_login(cast.alice)
    html = client.get("/usage/estimate/", {"offering": "h100-80gb", "units": 2, "max_runtime_seconds": 5400})
    assert "$8.00</strong> per hour" in html.content.decode() and "$12.00" in html.content.decode()
    assert "Choose an offering" in client.get("/usage/estimate/", {"offering": "nope"}).content.decode()
    assert client.get("/usage/estimate/", {"offering": "h100-80gb", "units": "two"}).status_code == 400


# --- endpoints: charged for the replicas that run ------------------------------------------------


def _endpoint(make_workload, min_replicas, max_replicas, started, finished=None, units=1):
    from jobs.models import Workload

    w = make_workload("h100-80gb", started=started, finished=finished, units=units, kind=Kind.ENDPOINT)
    Workload.objects.filter(pk=w.pk).update(replicas=min_replicas, max_replicas=max_replicas)
    w.refresh_from_db()
    return w


def _scaled(w, *changes):
    from jobs.models import WorkloadScale

    for when, replicas in changes:
        WorkloadScale.objects.create(workload=w, started_at=at(when), replicas=replicas)


def _gpu_minutes(w, now="2026-03-03 00:00:00"):
    return spend.workload_cost(w, now=at(now)).gpu_hours * 60


def test_an_endpoint_that_ran_1_replica_then_3_is_charged_for_those_not_for_max_replicas(make_workload):
    w = _endpoint(make_workload, 1, 4, started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00")
    _scaled(w, ("2026-03-02 09:59:50", 1), ("2026-03-02 10:50:00", 3))
    assert _gpu_minutes(w) == 80  # 1 × 50 + 3 × 10, not 4 × 60
    assert spend.workload_cost(w, now=at("2026-03-03 00:00:00")).allocated == Decimal(4) * 80  # 4.00/h per GPU


def test_a_minute_in_which_the_count_changed_is_charged_at_the_larger_count(make_workload):
    w = _endpoint(make_workload, 1, 4, started="2026-03-02 10:00:00", finished="2026-03-02 10:10:00")
    _scaled(w, ("2026-03-02 10:00:00", 2), ("2026-03-02 10:04:30", 1))
    assert _gpu_minutes(w) == 2 * 5 + 1 * 5  # 10:04 held two replicas for its first half


def test_minutes_before_the_first_observation_are_charged_at_min_replicas(make_workload):
    w = _endpoint(make_workload, 2, 8, started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00")
    assert _gpu_minutes(w) == 2 * 60  # never observed: KServe keeps min_replicas up
    _scaled(w, ("2026-03-02 10:30:00", 5))
    assert _gpu_minutes(w) == 2 * 30 + 5 * 30


def test_a_canarys_extra_pods_are_charged_while_they_run_even_after_it_is_promoted(make_workload):
    w = _endpoint(make_workload, 2, 2, started="2026-03-02 10:00:00", finished="2026-03-02 12:00:00", units=2)
    _scaled(w, ("2026-03-02 10:00:00", 2), ("2026-03-02 10:20:00", 3), ("2026-03-02 10:40:00", 2))
    # The canary (one pod of two GPUs) ran 10:20–10:40; canary_replicas is back to 0 since.
    assert w.canary_replicas == 0
    assert _gpu_minutes(w) == 2 * (2 * 120 + 1 * 20)


def test_an_endpoints_day_lines_split_by_the_units_it_ran_and_add_up(make_workload):
    w = _endpoint(make_workload, 1, 4, started="2026-03-02 23:00:00", finished="2026-03-03 01:00:00")
    _scaled(w, ("2026-03-02 23:00:00", 1), ("2026-03-02 23:30:00", 2), ("2026-03-03 00:30:00", 0))
    got = [
        (ln.day, ln.units, ln.minutes)
        for ln in spend.lines(at("2026-03-01 00:00:00"), at("2026-03-05 00:00:00"), now=at("2026-03-05 00:00:00"))
        if ln.workload_id == w.pk
    ]
    # 00:30–01:00 ran no replica (pods evicted, none rescheduled): nothing is charged for it.
    assert got == [(date(2026, 3, 2), 1, 30), (date(2026, 3, 2), 2, 30), (date(2026, 3, 3), 2, 30)]


def test_lines_read_the_replica_counts_in_one_query_whatever_the_number_of_endpoints(
    make_workload, django_assert_num_queries
):
    for _ in range(5):
        w = _endpoint(make_workload, 1, 4, started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00")
        _scaled(w, ("2026-03-02 10:00:00", 1), ("2026-03-02 10:30:00", 2))
    with django_assert_num_queries(4):  # workloads, earlier runs, activity, replica counts
        spend.lines(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00"), now=at("2026-03-03 00:00:00"))


def test_a_running_endpoints_rate_is_for_the_replicas_running_now(make_workload):
    from usage import reports

    w = _endpoint(make_workload, 1, 4, started="2026-03-02 10:00:00")
    _scaled(w, ("2026-03-02 10:00:00", 2))
    assert w.state == State.RUNNING
    assert reports.workload_usage(w, now=at("2026-03-02 11:00:00"))["price_per_hour"] == Decimal("8.00")  # not 16
