import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.models import State, Workload
from jobs.views import queue_position

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CONFIRMED = {"confirmed": "yes"}


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


# -- scoping ---------------------------------------------------------------------------------


def test_every_page_and_action_on_another_teams_workload_is_a_404(client, cast, make_workload):
    workload = make_workload(cast.nlp, user=cast.bob, state="running")
    client.force_login(cast.alice)
    for suffix in ("", "live/", "logs/"):
        assert client.get(f"/workloads/{workload.pk}/{suffix}", **HTMX).status_code == 404, suffix
    for action in ("stop", "start", "delete", "save-preset"):
        assert client.post(f"/workloads/{workload.pk}/{action}/", CONFIRMED).status_code == 404, action
    workload.refresh_from_db()
    assert workload.state == State.RUNNING and workload.deleted_at is None


def test_an_anonymous_visitor_is_sent_to_log_in_before_seeing_a_workload(client, make_workload):
    workload = make_workload()
    response = client.get(f"/workloads/{workload.pk}/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


# -- what the page shows ------------------------------------------------------------------------


def test_the_page_shows_the_request_its_admission_and_its_timeline(client, cluster, notebook):
    client.force_login(notebook.created_by)
    response = client.get(f"/workloads/{notebook.pk}/")
    page = text(response)
    assert response.status_code == 200
    assert "explore notebook" in page
    assert "Queued Why it waits: Waiting to be submitted to the cluster." in page
    assert (
        "Queued Requested by alice. Admitted as guaranteed: vision has 0 of 2 A100-80GB GPUs in use; "
        "this request needs 1 slice of A100-80GB (1g.10gb) = 0.14 A100-80GB GPU." in page
    )
    assert "Guaranteed · charged 0.14 A100-80GB GPU" in page
    assert "1 slice of A100-80GB (1g.10gb) per replica × 1 replica (1 slice of A100-80GB (1g.10gb) at most)" in page
    assert "gpu-portal-guaranteed" in page
    assert "image quay.io/jupyter/pytorch-notebook:2024-12-02" in page
    assert "Nothing has been applied to the cluster yet." in page
    assert f'hx-get="/workloads/{notebook.pk}/live/" hx-trigger="every 3s"' in response.content.decode()


def test_the_page_still_renders_when_the_cluster_cannot_be_asked(client, notebook):
    client.force_login(notebook.created_by)
    page = text(client.get(f"/workloads/{notebook.pk}/"))
    assert "The portal has no cluster to ask" in page
    assert "Requested by alice." in page
    assert "The portal has no cluster to ask" in text(client.get(f"/workloads/{notebook.pk}/logs/"))


def test_a_submitted_workload_shows_the_schedulers_reason_and_its_place_in_the_teams_queue(
    client, cluster, cast, make_workload
):
    now = timezone.now()
    first = make_workload(state="submitted", submitted_at=now - timedelta(minutes=3))
    waiting = make_workload(
        state="submitted",
        submitted_at=now - timedelta(minutes=2),
        cluster_message="0/9 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb.",
    )
    make_workload(state="submitted", submitted_at=now - timedelta(minutes=1))  # behind it
    make_workload(state="running", submitted_at=now - timedelta(minutes=9))  # running: out of the queue
    make_workload(cast.nlp, state="submitted", submitted_at=now - timedelta(minutes=9))  # another team's queue
    client.force_login(cast.alice)
    page = text(client.get(f"/workloads/{waiting.pk}/"))
    assert "number 2 in vision's queue" in page
    assert "Scheduler: 0/9 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb." in page
    assert queue_position(first) == 1


def test_the_queue_position_is_computed_in_one_query(make_workload, django_assert_num_queries):
    workload = make_workload(state="submitted", submitted_at=timezone.now())
    with django_assert_num_queries(1):
        assert queue_position(workload) == 1


def test_a_running_notebook_links_to_its_url(client, cluster, make_workload):
    workload = make_workload(state="running", url="https://kubeflow.example/notebook/team-vision/nb/")
    client.force_login(workload.created_by)
    page = client.get(f"/workloads/{workload.pk}/live/", **HTMX).content.decode()
    assert 'href="https://kubeflow.example/notebook/team-vision/nb/"' in page


def test_the_live_part_polls_while_the_workload_is_live_and_answers_286_once_it_is_over(
    client, cluster, cast, make_workload
):
    client.force_login(cast.alice)
    live = {
        make_workload(state="running"): 200,
        make_workload(state="pending_approval"): 200,
        make_workload(state="stopped"): 200,  # a stopped notebook can start again
        make_workload(state="succeeded", kind="training"): 286,
        make_workload(state="failed"): 286,
        make_workload(state="stopped", kind="training"): 286,
        make_workload(state="stopped", kind="endpoint"): 286,
    }
    for workload, status in live.items():
        response = client.get(f"/workloads/{workload.pk}/live/", **HTMX)
        assert response.status_code == status, (workload.kind, workload.state)
        assert "<html" not in response.content.decode()
    finished = next(w for w, s in live.items() if s == 286)
    head = client.get(f"/workloads/{finished.pk}/").content.decode().split("Summary")[0]
    # Only the cluster banner (on every page) still polls; the workload's parts do not.
    assert "hx-trigger" not in head.replace('hx-get="/cluster-banner/" hx-trigger="every 30s"', "")


def test_the_live_part_without_htmx_sends_the_browser_to_the_page(client, make_workload):
    workload = make_workload()
    client.force_login(workload.created_by)
    assert client.get(f"/workloads/{workload.pk}/live/")["Location"] == f"/workloads/{workload.pk}/"


def test_the_logs_fragment_shows_the_tail_of_the_pods_log(client, cluster, quotas):
    from jobs.kube.client import Cluster
    from jobs.kube.manifests import cluster_objects

    workload = lifecycle.request_workload(
        quotas.alice,
        quotas.vision,
        {"kind": "notebook", "name": "logs-nb", "offering": "cpu", "image": "quay.io/jupyter/base-notebook:2024-12-02"},
    )
    with Cluster.from_settings() as kube:
        kube.apply_all(cluster_objects())  # priority classes and runtimes, as the portal's setup applies them
        assert lifecycle.submit(workload.pk, kube)
    cluster.settle()
    client.force_login(quotas.alice)
    page = client.get(f"/workloads/{workload.pk}/logs/?tail=20", **HTMX).content.decode()
    assert "<html" not in page
    assert '<pre class="log"' in page
    assert re.search(r"Last 20 lines of <code>logs-nb[^<]*</code>", page)
    full = html.unescape(client.get(f"/workloads/{workload.pk}/").content.decode())
    assert "Successfully assigned team-vision/logs-nb-0" in full  # a Kubernetes event of its pod
    assert "The cluster did not answer" not in full
    # The manifests applied, in reading order although JSONB reorders keys.
    assert "<code>apiVersion: kubeflow.org/v1\nkind: Notebook\nmetadata:\n  name: logs-nb\n" in full


def test_the_logs_of_a_workload_without_pods_say_so(client, cluster, notebook):
    client.force_login(notebook.created_by)
    page = client.get(f"/workloads/{notebook.pk}/logs/").content.decode()
    assert "<html" in page  # without htmx: a page of its own
    assert "No pods yet" in page


# -- actions -----------------------------------------------------------------------------------


def test_stopping_from_the_page_asks_first_then_stops_through_the_lifecycle(client, notebook):
    client.force_login(notebook.created_by)
    ask = client.post(f"/workloads/{notebook.pk}/stop/")
    assert ask.status_code == 200 and "Stop vision/explore?" in text(ask)
    notebook.refresh_from_db()
    assert notebook.state == State.QUEUED
    done = client.post(f"/workloads/{notebook.pk}/stop/", CONFIRMED, follow=True)
    notebook.refresh_from_db()
    assert notebook.state == State.STOPPED
    assert notebook.events.filter(to_state=State.STOPPED, actor=notebook.created_by).exists()
    assert "vision/explore is stopping." in text(done)


def test_stopping_a_finished_workload_says_it_cannot(client, make_workload):
    workload = make_workload(state="succeeded", kind="training")
    client.force_login(workload.created_by)
    page = text(client.post(f"/workloads/{workload.pk}/stop/", CONFIRMED, follow=True))
    assert "A succeeded workload cannot be stopped." in page


def test_a_stopped_notebook_is_started_again_from_its_page(client, notebook):
    lifecycle.stop(notebook.created_by, notebook)
    client.force_login(notebook.created_by)
    page = client.get(f"/workloads/{notebook.pk}/").content.decode()
    assert f'action="/workloads/{notebook.pk}/start/"' in page
    client.post(f"/workloads/{notebook.pk}/start/", CONFIRMED)
    notebook.refresh_from_db()
    assert notebook.state == State.QUEUED


def test_starting_a_stopped_training_run_is_refused_with_the_reason(client, make_workload):
    workload = make_workload(state="stopped", kind="training")
    client.force_login(workload.created_by)
    page = text(client.post(f"/workloads/{workload.pk}/start/", CONFIRMED, follow=True))
    assert "only notebooks can be started again" in page
    workload.refresh_from_db()
    assert workload.state == State.STOPPED


def test_deleting_from_the_page_stops_and_hides_the_workload(client, notebook):
    client.force_login(notebook.created_by)
    response = client.post(f"/workloads/{notebook.pk}/delete/", CONFIRMED)
    assert response["Location"] == "/workloads/"
    workload = Workload.objects.get(pk=notebook.pk)
    assert workload.deleted_at is not None and workload.state == State.STOPPED
    assert client.get(f"/workloads/{notebook.pk}/").status_code == 404


def test_the_action_buttons_ask_for_confirmation_in_the_browser(client, notebook):
    client.force_login(notebook.created_by)
    page = client.get(f"/workloads/{notebook.pk}/").content.decode()
    forms = re.findall(r'<form method="post" action="/workloads/\d+/(\w+)/" data-confirm="[^"]+">', page)
    assert forms == ["stop", "delete"]  # no Start: the notebook is not stopped
