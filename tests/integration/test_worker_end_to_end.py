"""A real Celery worker on real Redis takes a notebook from request to running on the sandbox."""

import time

import pytest
from celery.contrib.testing.worker import start_worker

from jobs.models import State, Workload
from portal.celery import app
from quotas.models import Quota

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout=30.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


@pytest.fixture
def worker(settings):
    """An in-process Celery worker consuming from the real Redis broker."""
    app.conf.broker_url = settings.CELERY_BROKER_URL
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()  # no stale tasks from an earlier run
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield


def test_a_notebook_goes_from_request_to_running_through_a_real_worker(cast, catalog, api, portal_on_sandbox, worker):
    Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=1, limit=1)
    api.force_authenticate(cast.alice)
    response = api.post(
        "/api/v1/workloads/",
        {
            "team": "vision",
            "kind": "notebook",
            "name": "explore",
            "offering": "a100-80gb-1g.10gb",
            "gpus_per_replica": 1,
            "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    workload_id = response.json()["id"]
    assert wait_for(lambda: Workload.objects.get(pk=workload_id).state == State.SUBMITTED)

    def running():
        portal_on_sandbox.settle()
        app.send_task("jobs.reconcile")  # the worker runs it, as beat would
        return Workload.objects.get(pk=workload_id).state == State.RUNNING

    assert wait_for(running, timeout=40, interval=0.5), Workload.objects.get(pk=workload_id).state
    detail = api.get(f"/api/v1/workloads/{workload_id}/").json()
    assert detail["state"] == "running"
    assert [e["to_state"] for e in detail["timeline"] if e["to_state"]] == ["queued", "submitted", "running"]
