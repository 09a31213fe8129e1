"""A slow or unreachable cluster: pages stay fast and friendly, a banner says so, /readyz too.

Pages read through one client per process with short timeouts (PORTAL_KUBE_CONNECT_TIMEOUT /
PORTAL_KUBE_READ_TIMEOUT). A read that times out shows a sentence, never the exception, and
marks the cluster down in the cache: the banner on every page reads that mark, and panels
do not ask again for a few seconds. The sandbox's fault injection makes the cluster slow;
a kubeconfig pointing at a closed port makes it unreachable.
"""

import html
import re
import socket
import time

import pytest
import yaml

from jobs import cluster_status
from jobs.kube.client import shared_cluster

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def page_timeouts(settings):
    settings.KUBE_CONNECT_TIMEOUT = 1
    settings.KUBE_READ_TIMEOUT = 1
    return settings


@pytest.fixture
def own_cluster(portal_on_sandbox, page_timeouts):
    """A sandbox of this test's own (its kubeconfig path keys the recorded status: nothing leaks)."""
    return portal_on_sandbox


@pytest.fixture
def unreachable(settings, tmp_path, page_timeouts):
    """A kubeconfig whose server is a port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
                "current-context": "gone",
            }
        )
    )
    settings.KUBE_CONFIG = str(path)
    settings.KUBE_CONTEXT = ""
    return path


def test_pages_share_one_client_per_process_and_closing_it_does_nothing(own_cluster, settings):
    first = shared_cluster()
    with shared_cluster() as second:
        assert second is first
    assert first.ping()  # still usable after the `with`
    settings.KUBE_READ_TIMEOUT = 2
    assert shared_cluster() is not first, "a client built from other settings is not reused"


def test_a_slow_cluster_costs_a_panel_the_read_timeout_and_shows_a_sentence_not_an_exception(
    client, own_cluster, quotas, make_workload
):
    workload = make_workload(state="running")
    own_cluster.inject_fault(hang_seconds=4, verb="list", kind="pods", count=5)
    client.force_login(quotas.alice)

    started = time.monotonic()
    response = client.get(f"/workloads/{workload.pk}/live/", **HTMX)
    elapsed = time.monotonic() - started
    page = text(response)
    assert response.status_code == 200
    assert 0.9 < elapsed < 3, f"the panel waited {elapsed:.1f} s; the read timeout is 1 s, the cluster hangs 4 s"
    assert "The cluster is not answering right now (timed out), so the Kubernetes events cannot be shown." in page
    for leak in ("Timeout", "127.0.0.1", "HTTPConnectionPool", "Error"):
        assert leak not in page, leak

    # The other panels do not wait again: within the back-off they answer at once.
    started = time.monotonic()
    logs = text(client.get(f"/workloads/{workload.pk}/logs/", **HTMX))
    assert time.monotonic() - started < 0.5
    assert "The cluster is not answering right now (timed out), so the logs cannot be shown." in logs
    own_cluster.clear_faults()


def test_every_page_shows_a_banner_while_the_cluster_is_known_to_be_down(client, own_cluster, cast):
    client.force_login(cast.alice)
    assert "The cluster is not answering" not in text(client.get("/workloads/"))
    own_cluster.inject_fault(503, verb="list", kind="pods")
    cluster_status.unavailable(_pods_error(), "logs")
    page = text(client.get("/workloads/"))
    assert "The cluster is not answering (HTTP 503 ServiceUnavailable at" in page
    # The banner is read from the cache, never by asking the cluster on the request.
    cluster_status.probe()
    assert "The cluster is not answering" not in text(client.get("/workloads/"))


def _pods_error():
    from jobs.kube.errors import ClusterError

    try:
        shared_cluster().pods_for("team-vision", {"a": "b"})
    except ClusterError as exc:
        return exc
    raise AssertionError("the injected fault did not fail the read")


def test_open_pages_poll_the_banner_so_it_appears_and_clears_without_a_reload(client, cast):
    client.force_login(cast.alice)
    page = client.get("/workloads/").content.decode()
    assert 'hx-get="/cluster-banner/" hx-trigger="every 30s"' in page
    cluster_status.record(False, "timed out")
    assert "The cluster is not answering (timed out at" in text(client.get("/cluster-banner/", **HTMX))
    cluster_status.record(True)
    assert "The cluster is not answering" not in text(client.get("/cluster-banner/", **HTMX))


def test_the_banner_is_not_shown_to_anonymous_visitors(client, own_cluster):
    cluster_status.record(False, "timed out")
    assert "The cluster is not answering" not in text(client.get("/login/"))


def test_a_refusal_is_an_answer_the_cluster_is_not_marked_down(client, own_cluster, quotas, make_workload):
    workload = make_workload(state="running")
    own_cluster.inject_fault(403, verb="list", kind="pods")
    client.force_login(quotas.alice)
    page = text(client.get(f"/workloads/{workload.pk}/logs/", **HTMX))
    assert "The cluster would not show the logs (HTTP 403 Forbidden)" in page
    assert cluster_status.current() is None or cluster_status.current().reachable


def test_readyz_is_ok_while_the_cluster_answers(client, own_cluster):
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.content
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok", "cluster": "ok"}


def test_readyz_is_503_with_the_reason_when_the_cluster_is_unreachable(client, unreachable):
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["cluster"] == "down: connection failed"
    assert ready.json()["checks"]["database"] == "ok"
    assert str(unreachable) not in ready.content.decode()


def test_the_charts_readiness_probe_keeps_the_portal_serving_while_the_cluster_is_down(client, unreachable):
    # The chart probes /readyz?skip=cluster: users still reach the pages and their banner.
    ready = client.get("/readyz?skip=cluster")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok"}
    assert client.get("/readyz?skip=database").status_code == 503  # only registered checks can be skipped


def test_readyz_says_when_no_cluster_is_configured(client, settings, tmp_path):
    settings.KUBE_CONFIG = str(tmp_path / "absent")
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["cluster"] == "down: not configured"


def test_the_check_task_records_what_the_banner_shows(client, cast, unreachable):
    from jobs.tasks import check_cluster

    client.force_login(cast.alice)
    assert check_cluster() is False
    assert "The cluster is not answering (connection failed at" in text(client.get("/workloads/"))


def test_the_api_log_endpoint_says_the_cluster_is_not_answering_without_the_exception(api, make_workload, unreachable):
    workload = make_workload(state="running")
    api.force_authenticate(workload.created_by)
    answer = api.get(f"/api/v1/workloads/{workload.pk}/logs/")
    assert answer.status_code == 502
    assert answer.json()["detail"].startswith("The cluster is not answering right now (connection failed)")
    assert str(unreachable) not in answer.content.decode()


def test_without_a_configured_cluster_the_banner_says_so_rather_than_not_answering(client, cast, settings, tmp_path):
    settings.KUBE_CONFIG = str(tmp_path / "absent")
    assert cluster_status.probe().reason == "not configured"
    client.force_login(cast.alice)
    page = text(client.get("/workloads/"))
    assert "The portal has no cluster configured" in page
    assert "The cluster is not answering" not in page
