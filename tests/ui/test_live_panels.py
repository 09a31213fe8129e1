"""The Logs and Manifests panels of a workload page follow the workload without a reload.

Each panel is replaced whole by its own poll while the workload is live. The poll carries a
digest of what the panel shows: the server answers 204 (htmx swaps nothing) while nothing
changed, the new panel once something did, and 286 (htmx stops polling) once the workload is over.
"""

import re

import pytest

from jobs import lifecycle

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
BASE_IMAGE = "quay.io/jupyter/base-notebook:2024-12-02"


def poll_url(fragment: str, panel_id: str) -> str:
    """The hx-get of the panel's own polling element, as the browser would request it."""
    match = re.search(rf'<div id="{panel_id}" hx-get="([^"]+)" hx-trigger="every \d+s" hx-swap="outerHTML"', fragment)
    assert match, f"#{panel_id} does not poll:\n{fragment}"
    return match.group(1).replace("&amp;", "&")


def submit(cluster, workload):
    from jobs.kube.client import Cluster
    from jobs.kube.manifests import cluster_objects

    with Cluster.from_settings() as kube:
        kube.apply_all(cluster_objects())
        assert lifecycle.submit(workload.pk, kube)
    cluster.settle()


def test_the_manifests_panel_fills_in_when_the_workload_is_submitted_without_a_reload(client, cluster, notebook):
    client.force_login(notebook.created_by)
    page = client.get(f"/workloads/{notebook.pk}/").content.decode()
    assert "Nothing has been applied to the cluster yet." in page
    url = poll_url(page, "workload-manifests")

    # Nothing changed yet: no swap, the poll goes on.
    assert client.get(url, **HTMX).status_code == 204

    submit(cluster, notebook)
    response = client.get(url, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in fragment
    assert "Nothing has been applied" not in fragment
    assert "kind: Notebook\nmetadata:\n  name: explore\n" in fragment
    # The new panel polls with the new digest, which is unchanged until something is applied again.
    assert client.get(poll_url(fragment, "workload-manifests"), **HTMX).status_code == 204


def test_the_logs_panel_shows_the_pods_log_once_it_starts_without_a_reload(client, cluster, quotas):
    workload = lifecycle.request_workload(
        quotas.alice,
        quotas.vision,
        {"kind": "notebook", "name": "live-logs", "offering": "cpu", "image": BASE_IMAGE},
    )
    client.force_login(quotas.alice)
    first = client.get(f"/workloads/{workload.pk}/logs/", **HTMX).content.decode()
    assert "No pods yet" in first
    url = poll_url(first, "workload-logs")
    assert client.get(url, **HTMX).status_code == 204

    submit(cluster, workload)
    response = client.get(url, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200
    assert "No pods yet" not in fragment
    assert re.search(r"Last 200 lines of <code>live-logs-0</code>", fragment)
    # The next poll asks for the same pod and tail as the panel shows.
    assert "pod=live-logs-0" in poll_url(fragment, "workload-logs")


def test_the_logs_poll_keeps_the_chosen_tail(client, cluster, notebook):
    client.force_login(notebook.created_by)
    fragment = client.get(f"/workloads/{notebook.pk}/logs/?tail=25", **HTMX).content.decode()
    assert "tail=25&" in poll_url(fragment, "workload-logs")


def test_the_panels_stop_polling_once_the_workload_is_over(client, cluster, make_workload):
    workload = make_workload(kind="training", state="succeeded", applied_manifests=[{"kind": "TrainJob"}])
    client.force_login(workload.created_by)
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert 'id="workload-manifests" hx-get' not in page
    logs = client.get(f"/workloads/{workload.pk}/logs/", **HTMX)
    assert 'id="workload-logs" hx-get' not in logs.content.decode()
    # A poll still in flight when the workload ended gets the final panel and the stop signal.
    manifests = client.get(f"/workloads/{workload.pk}/manifests/?seen=stale", **HTMX)
    assert manifests.status_code == 286
    assert "1 object" in manifests.content.decode()


def test_the_manifests_panel_of_another_teams_workload_is_a_404(client, cast, make_workload):
    workload = make_workload(cast.nlp, user=cast.bob)
    client.force_login(cast.alice)
    assert client.get(f"/workloads/{workload.pk}/manifests/", **HTMX).status_code == 404


def test_the_manifests_panel_without_htmx_sends_the_browser_to_the_page(client, make_workload):
    workload = make_workload()
    client.force_login(workload.created_by)
    assert client.get(f"/workloads/{workload.pk}/manifests/")["Location"] == f"/workloads/{workload.pk}/"


def test_the_logs_poll_keeps_asking_for_the_chosen_pod_while_the_cluster_is_not_answering(client, notebook):
    client.force_login(notebook.created_by)
    fragment = client.get(f"/workloads/{notebook.pk}/logs/?pod=explore-0&tail=50", **HTMX).content.decode()
    assert "The portal has no cluster to ask right now" in fragment
    url = poll_url(fragment, "workload-logs")
    assert "pod=explore-0" in url and "tail=50" in url
