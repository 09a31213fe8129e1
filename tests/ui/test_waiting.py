"""Pending work says why it waits and what to do, on its page and in the list.

alice: member of vision, owns the workloads here.
"""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Workload
from jobs.views import queue_position, queue_positions
from jobs.waiting import explain
from portal.models import Offering

pytestmark = pytest.mark.django_db

SCHEDULER_BUSY = "0/9 nodes are available: 1 Insufficient nvidia.com/gpu, 8 node(s) didn't match Pod's node affinity."
VOLCANO_QUEUE_FULL = (
    "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable; "
    'queue resource quota insufficient: queue "team-vision": nvidia.com/gpu: requested 16, allocated 0, capability 8'
)


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def fresh(workload):
    """The row as the pages read it, with the offering's capacity as stored now."""
    return Workload.objects.select_related("team", "offering").get(pk=workload.pk)


def test_running_and_finished_work_does_not_wait(make_workload):
    for state in ("running", "succeeded", "failed", "stopped", "rejected"):
        assert explain(make_workload(state=state)) is None


def test_an_exception_waits_for_a_platform_admin(make_workload):
    waiting = explain(make_workload(state="pending_approval", wants_exception=True))
    assert waiting.short == "Awaiting approval"
    assert waiting.reason == "Over vision's quota: waiting for a platform admin to approve the exception."
    assert "notice when it is decided" in waiting.action


def test_burst_work_held_back_by_the_budget_says_so(make_workload):
    waiting = explain(make_workload(state="pending_approval", wants_exception=False))
    assert "spent this month's budget" in waiting.reason


def test_a_workload_the_cluster_keeps_refusing_to_take_says_the_portal_retries(make_workload):
    assert explain(make_workload(state="queued")).reason == "Waiting to be submitted to the cluster."
    assert "attempt 3" in explain(make_workload(state="queued", submit_attempts=3)).reason


def test_no_free_gpus_says_wait_or_ask_for_less_with_the_place_in_the_queue(make_workload, catalog):
    Offering.objects.filter(slug="h100-80gb").update(total_units=16, free_units=0)
    workload = fresh(make_workload(state="submitted", offering="h100-80gb", cluster_message=SCHEDULER_BUSY))
    waiting = explain(workload, 2)
    assert waiting.short == "#2 in queue · No free h100-80gb"
    assert "No node has enough free h100-80gb for it right now (0 of 16 free when last counted)" in waiting.reason
    assert "It is number 2 in vision's queue." in waiting.reason
    assert "fewer GPUs or replicas" in waiting.action


def test_a_full_team_queue_says_stop_other_work(make_workload):
    waiting = explain(make_workload(state="submitted", cluster_message=VOLCANO_QUEUE_FULL, admission="preemptible"))
    assert waiting.short == "Team queue full"
    assert "burst work above the team's guarantee" in waiting.reason
    assert "stop work you no longer need" in waiting.action


def test_kueue_quota_wording_counts_as_a_full_queue(make_workload):
    message = "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor x"
    assert explain(make_workload(state="submitted", cluster_message=message)).short == "Team queue full"


def test_an_image_that_cannot_be_pulled_says_fix_the_image(make_workload):
    waiting = explain(make_workload(state="submitted", cluster_message="ImagePullBackOff: Back-off pulling image"))
    assert waiting.short == "Image cannot be pulled"
    assert "image name and tag" in waiting.action


def test_nodes_that_cannot_take_work_say_tell_an_admin(make_workload):
    message = "0/9 nodes are available: 1 node(s) were unschedulable, 8 node(s) didn't match Pod's node affinity."
    assert "platform admin" in explain(make_workload(state="submitted", cluster_message=message)).action


def test_work_the_cluster_shrank_under_says_it_can_never_run(make_workload, catalog):
    Offering.objects.filter(slug="h100-80gb").update(node_units=[8])
    workload = make_workload(state="submitted", offering="h100-80gb", kind="training", gpus_per_replica=8, replicas=2)
    waiting = explain(fresh(workload))
    assert waiting.short == "Can never run"
    assert "at most 1 node x 8 GPUs of h100-80gb exist" in waiting.reason


def test_the_page_shows_why_and_what_to_do(client, cast, cluster, make_workload):
    make_workload(state="submitted", submitted_at=timezone.now() - timedelta(minutes=5))
    workload = make_workload(state="submitted", submitted_at=timezone.now(), cluster_message=SCHEDULER_BUSY)
    client.force_login(cast.alice)
    page = text(client.get(f"/workloads/{workload.pk}/"))
    assert "Why it waits: No node has enough free a100-80gb-1g.10gb" in page
    assert "It is number 2 in vision's queue." in page
    assert "What you can do: It starts by itself when they free up." in page
    assert f"Scheduler: {SCHEDULER_BUSY}" in page


def test_the_list_shows_the_place_in_the_queue_and_the_short_reason(client, cast, make_workload):
    now = timezone.now()
    make_workload(state="submitted", submitted_at=now - timedelta(minutes=5))
    make_workload(state="submitted", submitted_at=now, cluster_message=SCHEDULER_BUSY)
    make_workload(state="pending_approval", wants_exception=True)
    client.force_login(cast.alice)
    page = text(client.get("/workloads/"))
    assert "#2 in queue · No free a100-80gb-1g.10gb" in page
    assert "#1 in queue · Waiting for the scheduler" in page
    assert "Awaiting approval" in page


def test_list_positions_match_the_detail_pages_and_take_one_query(cast, make_workload, django_assert_num_queries):
    now = timezone.now()
    vision = [make_workload(state="submitted", submitted_at=now - timedelta(minutes=i)) for i in range(3)]
    nlp = make_workload(cast.nlp, user=cast.bob, state="submitted", submitted_at=now)
    running = make_workload(state="running")
    listed = [*vision, nlp, running]
    with django_assert_num_queries(1):
        positions = queue_positions(listed)
    assert positions == {w.pk: queue_position(w) for w in [*vision, nlp]}
    assert positions[nlp.pk] == 1 and running.pk not in positions
